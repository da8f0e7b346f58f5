//! The command wake-up bus: the in-process bus that wakes an asset's
//! streams when a command of it becomes deliverable (or its credential is
//! revoked), and the PostgreSQL LISTEN/NOTIFY bridge that carries those
//! wake-ups between hub replicas. The streams themselves (SSE and QUIC)
//! belong to the platform area.
//!
//! A wake-up carries no command: a stream that wakes reads the asset's
//! deliverable commands after the last position it sent, so a lost or
//! duplicated wake-up can delay nothing beyond the next one and never
//! reorders or loses a command.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::watch;

use crate::{
    db::{self, Backend, Tx},
    error::ApiResult,
    state::AppState,
};

/// The PostgreSQL notification channel of deliverable commands; the
/// payload is the sending hub's origin id, a space, and the asset id (a
/// payload of the asset id alone, from an older replica, is taken too).
pub const COMMAND_CHANNEL: &str = "hub_commands";

/// Wake-ups by asset: every stream of an asset holds a receiver of the
/// asset's counter and wakes when it changes.
pub struct Bus {
    assets: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Wake-ups by tenant for the observers of its commands
    /// (`GET /api/commands/watch`): every change of a command's state.
    tenants: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Set when the hub stops: long-lived SSE responses end so that the
    /// graceful shutdown, which waits for open responses, can finish.
    closing: watch::Sender<bool>,
    /// Open SSE streams by robot credential on this hub.
    sse_open: Arc<Mutex<HashMap<String, u64>>>,
    /// This hub's id in its notifications: the listener skips its own,
    /// whose streams the sender woke already after its commit (a second
    /// wake-up would only make each stream read the database again).
    origin: String,
}

impl Default for Bus {
    fn default() -> Self {
        Bus { assets: Mutex::default(), tenants: Mutex::default(), closing: watch::channel(false).0, sse_open: Arc::default(), origin: crate::db::new_id() }
    }
}

/// One of a credential's SSE stream slots, given back when dropped (when
/// the stream ends, however it ends).
pub struct StreamSlot {
    open: Arc<Mutex<HashMap<String, u64>>>,
    credential_id: String,
    /// A robot's stream (counted in `hub_agents_connected`), not an observer's.
    agent: bool,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if self.agent {
            metrics::gauge!("hub_agents_connected", "transport" => "sse").decrement(1.0);
        }
        let mut open = self.open.lock().expect("stream slots lock");
        if let Some(n) = open.get_mut(&self.credential_id) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.credential_id);
            }
        }
    }
}

impl Bus {
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Ends every stream of this hub (at shutdown).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    pub fn subscribe(&self, asset_id: &str) -> watch::Receiver<u64> {
        let mut map = self.assets.lock().expect("bus lock");
        map.entry(asset_id.to_string()).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    /// Wakes the asset's streams on this hub.
    pub fn wake(&self, asset_id: &str) {
        if let Some(tx) = self.assets.lock().expect("bus lock").get(asset_id) {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Wakes every stream (after wake-ups may have been missed).
    pub fn wake_all(&self) {
        for tx in self.assets.lock().expect("bus lock").values() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
        for tx in self.tenants.lock().expect("bus lock").values() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// A receiver that changes whenever a command of the tenant changes state.
    pub fn subscribe_tenant(&self, tenant_id: &str) -> watch::Receiver<u64> {
        let mut map = self.tenants.lock().expect("bus lock");
        map.entry(tenant_id.to_string()).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    /// Wakes the observers of the tenant's commands on this hub.
    pub fn wake_tenant(&self, tenant_id: &str) {
        if let Some(tx) = self.tenants.lock().expect("bus lock").get(tenant_id) {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Takes one of the credential's SSE stream slots, or `None` when it
    /// already holds `max` streams open here. The count is per hub process:
    /// a stream lives in one process, and a count in the database would
    /// outlive a process that dies holding streams.
    pub fn open_sse(&self, credential_id: &str, max: u64) -> Option<StreamSlot> {
        self.open_slot(credential_id, max, true)
    }

    /// [`Bus::open_sse`] for an observer of a tenant's commands, counted
    /// under `watch:<persona>` (its own count, and not an agent).
    pub fn open_watch(&self, persona_id: &str, max: u64) -> Option<StreamSlot> {
        self.open_slot(&format!("watch:{persona_id}"), max, false)
    }

    fn open_slot(&self, key: &str, max: u64, agent: bool) -> Option<StreamSlot> {
        let mut open = self.sse_open.lock().expect("stream slots lock");
        let n = open.entry(key.to_string()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        if agent {
            metrics::gauge!("hub_agents_connected", "transport" => "sse").increment(1.0);
        }
        Some(StreamSlot { open: self.sse_open.clone(), credential_id: key.to_string(), agent })
    }

    /// Forgets assets nobody listens to any more.
    pub fn prune(&self) {
        self.assets.lock().expect("bus lock").retain(|_, tx| tx.receiver_count() > 0);
        self.tenants.lock().expect("bus lock").retain(|_, tx| tx.receiver_count() > 0);
    }

    /// How many assets have a stream open on this hub.
    pub fn listening(&self) -> usize {
        self.assets.lock().expect("bus lock").values().filter(|tx| tx.receiver_count() > 0).count()
    }
}

/// Tells the streams of `asset_id` on every other replica to look again
/// once `tx` commits: on PostgreSQL a NOTIFY, which the database delivers
/// at commit and not before. The caller wakes this hub's own streams after
/// the commit (`Bus::wake`), which is all SQLite (one hub) needs.
pub async fn notify(state: &AppState, tx: &mut Tx, asset_id: &str) -> ApiResult<()> {
    if let Some((item, [channel, payload])) = notify_item(state, asset_id, 1) {
        sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {item}"))).bind(channel).bind(payload).execute(&mut **tx).await?;
    }
    Ok(())
}

/// [`notify`] as an item of the `RETURNING` list of the statement that
/// makes a command deliverable (a round trip fewer; PostgreSQL delivers it
/// at commit all the same): the item, whose parameters are `$first` and
/// `$first + 1`, and their values. `None` on SQLite, where waking this
/// hub's streams after the commit is all there is to do.
pub fn notify_item(state: &AppState, asset_id: &str, first: usize) -> Option<(String, [String; 2])> {
    (state.db.backend == Backend::Postgres).then(|| {
        let item = format!("pg_notify(${first}, ${})::text AS notified", first + 1);
        (item, [COMMAND_CHANNEL.to_string(), format!("{} {asset_id}", state.streams.origin)])
    })
}

/// The prefix of a notification's subject that names a tenant whose
/// command changed state (an older replica takes it for an asset id that
/// no stream listens to, and ignores it).
const TENANT_PREFIX: &str = "t:";

/// Tells the observers of the tenant's commands (`GET /api/commands/watch`),
/// on this hub and on every other replica, that a command of it changed
/// state. Called after the change committed; a lost wake-up is caught up
/// by the observers' safety re-check, so a failed notification is logged,
/// not answered.
pub async fn command_changed(state: &AppState, tenant_id: &str) {
    state.streams.wake_tenant(tenant_id);
    if state.db.backend == Backend::Postgres {
        let payload = format!("{} {TENANT_PREFIX}{tenant_id}", state.streams.origin);
        if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)::text").bind(COMMAND_CHANNEL).bind(payload).execute(state.db.writer()).await {
            tracing::warn!(error = %e, "notifying the other replicas of a command change");
        }
    }
}

/// The asset a notification names, or None for this hub's own.
fn foreign_asset<'a>(origin: &str, payload: &'a str) -> Option<&'a str> {
    match payload.split_once(' ') {
        Some((from, _)) if from == origin => None,
        Some((_, asset)) => Some(asset),
        None => Some(payload),
    }
}

/// The pruning of idle wake-up channels and, on PostgreSQL, the listener
/// of other replicas' wake-ups (after a gap in it, every stream looks again).
pub fn spawn_background(state: &AppState) {
    let s = state.clone();
    db::every(Duration::from_secs(30), move || {
        s.streams.prune();
        async {}
    });
    if state.db.backend == Backend::Postgres {
        let s = state.clone();
        tokio::spawn(async move {
            let woken = s.clone();
            let wake = move |payload: String| {
                if let Some(subject) = foreign_asset(&woken.streams.origin, &payload) {
                    match subject.strip_prefix(TENANT_PREFIX) {
                        Some(tenant) => woken.streams.wake_tenant(tenant),
                        None => woken.streams.wake(subject),
                    }
                }
                std::future::ready(())
            };
            db::follow(s.db.url.clone(), COMMAND_CHANNEL, wake, || s.streams.wake_all()).await
        });
    }
}

/// How long a stream waits without a wake-up before it looks again anyway:
/// a safety net only; deliveries ride on wake-ups.
pub const SAFETY_RECHECK: Duration = Duration::from_secs(30);

/// Most commands read per look.
pub const BATCH: i64 = 256;

#[cfg(test)]
mod tests {
    use super::foreign_asset;

    #[test]
    fn a_hub_skips_its_own_notifications_and_takes_the_others() {
        assert_eq!(foreign_asset("hub-a", "hub-a asset-1"), None);
        assert_eq!(foreign_asset("hub-a", "hub-b asset-1"), Some("asset-1"));
        assert_eq!(foreign_asset("hub-a", "asset-1"), Some("asset-1"));
    }
}
