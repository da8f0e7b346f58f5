//! The database: one `AnyPool` over SQLite or PostgreSQL, the embedded
//! migrations of each backend, and the time and id helpers every table uses.
//!
//! Queries are written once in SQL both backends accept (`$N` placeholders,
//! `RETURNING`, `ON CONFLICT`). Ids are UUIDv7 text, times RFC 3339 UTC text
//! with microseconds (they sort as text), JSON is text, booleans INTEGER 0/1.

pub mod change;
pub mod counts;
pub mod rows;

use std::{str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    Any, AnyPool, Transaction,
    any::{AnyConnectOptions, AnyPoolOptions},
    migrate::Migrator,
};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/postgres");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend a connection (or a transaction, through deref) speaks.
    pub fn of(conn: &sqlx::AnyConnection) -> Backend {
        if conn.backend_name().eq_ignore_ascii_case("sqlite") { Backend::Sqlite } else { Backend::Postgres }
    }

    /// What a `SELECT` of work items ends with so that replicas sweeping
    /// at once take disjoint rows: ` FOR UPDATE SKIP LOCKED` on
    /// PostgreSQL; nothing on SQLite, whose one writer sweeps alone.
    pub fn skip_locked(self) -> &'static str {
        match self {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        }
    }

    /// What a `SELECT` of a row that a later statement of the same
    /// transaction relies on ends with, so that no other transaction
    /// changes it (an erasure's guarded `UPDATE`) until this one commits:
    /// ` FOR NO KEY UPDATE` on PostgreSQL (a foreign key's `KEY SHARE`
    /// does not block an `UPDATE` of a non-key column); nothing on SQLite,
    /// whose one writer holds the whole database.
    pub fn no_key_update(self) -> &'static str {
        match self {
            Backend::Postgres => " FOR NO KEY UPDATE",
            Backend::Sqlite => "",
        }
    }

    /// The SQL expression of the seconds (a real number, fractions kept)
    /// from the stored RFC 3339 time `from` to the stored time `to`, both
    /// SQL expressions (columns or parameters): negative when `to` is
    /// earlier. Stored times are text, so each backend parses them its way:
    /// `julianday` on SQLite, a cast to `timestamptz` on PostgreSQL.
    pub fn seconds_between(self, from: &str, to: &str) -> String {
        match self {
            Backend::Sqlite => format!("((julianday({to}) - julianday({from})) * 86400.0)"),
            Backend::Postgres => format!("CAST(EXTRACT(EPOCH FROM (CAST({to} AS timestamptz) - CAST({from} AS timestamptz))) AS DOUBLE PRECISION)"),
        }
    }
}

/// The hub's database handle.
///
/// On SQLite, writes go through a separate single-connection pool: SQLite
/// allows one writer at a time, and queueing writers in the application
/// avoids `SQLITE_BUSY` failures on lock upgrades. Reads use the wide pool
/// (WAL lets them run beside the writer). On PostgreSQL both are one pool.
#[derive(Clone)]
pub struct Db {
    pub read: AnyPool,
    write: AnyPool,
    pub backend: Backend,
    pub url: String,
    /// PostgreSQL: a small pool on the native driver for long streamed
    /// reads (chain verification), where the Any driver's copy of every
    /// value would cost more than the work done on it. Connects lazily.
    streams: Option<sqlx::PgPool>,
}

pub type Tx = Transaction<'static, Any>;

/// Connections of the native PostgreSQL pool for streamed reads: enough
/// for a few verifications' parts at once, few beside the main pool.
const STREAM_CONNECTIONS: u32 = 4;

impl Db {
    pub async fn connect(url: &str) -> anyhow::Result<Db> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite: or postgres:");
        };
        let options = AnyConnectOptions::from_str(url).context("parsing DATABASE_URL")?;
        let db = match backend {
            Backend::Sqlite => {
                let read = sqlite_pool(8).connect_with(options.clone()).await.context("opening SQLite")?;
                let write = sqlite_pool(1).connect_with(options).await.context("opening SQLite")?;
                Db { read, write, backend, url: url.to_string(), streams: None }
            }
            Backend::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(10))
                    // No ping before each use: it is a round trip of its own
                    // before every statement or transaction (a ReBAC check
                    // paid two for one). A connection the server dropped
                    // fails its next statement instead, and the pool
                    // discards it; idle connections are closed after 10
                    // minutes and every connection after 30.
                    .test_before_acquire(false)
                    .connect_with(options)
                    .await
                    .context("connecting to PostgreSQL")?;
                let streams = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(STREAM_CONNECTIONS)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_lazy(url)
                    .context("parsing DATABASE_URL")?;
                Db { read: pool.clone(), write: pool, backend, url: url.to_string(), streams: Some(streams) }
            }
        };
        Ok(db)
    }

    /// The native PostgreSQL pool for streamed reads.
    pub fn postgres_streams(&self) -> anyhow::Result<sqlx::PgPool> {
        self.streams.clone().context("streamed reads on the native pool are for PostgreSQL")
    }

    /// This backend's migrations.
    fn migrator(&self) -> &'static Migrator {
        match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        }
    }

    /// Applies every pending migration of this backend.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        self.migrator().run(&self.write).await.context("running migrations")?;
        Ok(())
    }

    /// Applies the migrations up to `version` only: an upgrade from an
    /// older schema is tested by building that schema first.
    #[doc(hidden)]
    pub async fn migrate_to(&self, version: i64) -> anyhow::Result<()> {
        self.migrator().run_to(version, &self.write).await.context("running migrations")?;
        Ok(())
    }

    /// Starts a write transaction.
    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        self.write.begin().await
    }

    /// Holds the SQLite write connection, idle, while the caller writes
    /// through a connection of its own (the audit appender's): no sqlx
    /// write runs meanwhile, so the two never contend for SQLite's lock.
    pub async fn hold_writer(&self) -> Result<sqlx::pool::PoolConnection<Any>, sqlx::Error> {
        self.write.acquire().await
    }

    /// The SQLite database file (None on PostgreSQL), for work that opens
    /// connections of its own beside the pools.
    pub fn sqlite_file(&self) -> Option<std::path::PathBuf> {
        if self.backend != Backend::Sqlite {
            return None;
        }
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&self.url).ok()?;
        let file = options.get_filename();
        (!file.as_os_str().is_empty() && file != std::path::Path::new(":memory:")).then(|| file.to_path_buf())
    }

    /// The pool for single write statements outside a transaction.
    pub fn writer(&self) -> &AnyPool {
        &self.write
    }
}

/// WAL frames (pages) after which a SQLite writer checkpoints in its own
/// commit. The audit appender's checkpoint thread copies the WAL into the
/// database in the background long before that; this bounds the WAL when
/// it cannot keep up (the WAL restarts only after a checkpoint copied all
/// of it). SQLite's default, 1,000, put a checkpoint with its syncs into
/// one request's commit every few hundred writes.
pub const WAL_AUTOCHECKPOINT: u32 = 10_000;

fn sqlite_pool(max: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        // A local file does not go stale: no ping before each use.
        .test_before_acquire(false)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                use sqlx::Executor;
                let pragmas = format!(
                    "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000; \
                     PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT};"
                );
                conn.execute(sqlx::AssertSqlSafe(pragmas)).await?;
                Ok(())
            })
        })
}

/// Now, as stored: RFC 3339 UTC with microseconds.
pub fn now() -> String {
    format_time(chrono::Utc::now())
}

pub fn format_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// `t` plus `seconds`, or `None` outside chrono's range: time arithmetic on
/// a number a client chose is checked, never a panic.
pub fn add_seconds(t: chrono::DateTime<chrono::Utc>, seconds: i64) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::TimeDelta::try_seconds(seconds).and_then(|d| t.checked_add_signed(d))
}

/// Parses a client-supplied RFC 3339 time into the stored form.
pub fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s.trim()).ok().map(|t| t.with_timezone(&chrono::Utc))
}

/// `$first, $first+1, ...`: `n` numbered placeholders, for an `IN (...)`
/// list bound after `first - 1` other arguments.
pub fn placeholders(first: usize, n: usize) -> String {
    (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// A new time-ordered identifier.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Runs `task` every `period` in the background, for the life of the
/// process (sweepers and pruners).
pub fn every<F, Fut>(period: Duration, mut task: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            task().await;
        }
    });
}

/// Follows a PostgreSQL notification channel for the life of the process:
/// each payload goes to `on_payload`; `on_gap` runs whenever notifications
/// may have been missed (at start and after a lost connection, before
/// listening again), so the caller can drop or re-check what it holds.
pub async fn follow<P, Fut, G>(url: String, channel: &'static str, mut on_payload: P, on_gap: G)
where
    P: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
    G: Fn(),
{
    loop {
        match sqlx::postgres::PgListener::connect(&url).await {
            Ok(mut listener) => match listener.listen(channel).await {
                Err(e) => tracing::error!(error = %e, channel, "LISTEN failed"),
                Ok(()) => {
                    on_gap();
                    loop {
                        match listener.recv().await {
                            Ok(n) => on_payload(n.payload().to_string()).await,
                            Err(e) => {
                                tracing::warn!(error = %e, channel, "notification channel lost");
                                break;
                            }
                        }
                    }
                }
            },
            Err(e) => tracing::error!(error = %e, channel, "connecting a notification listener"),
        }
        on_gap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
