//! `AppState`: the database, the master key, the signing keys in force, the
//! caches of the gate and of the areas, and the invalidation channel that
//! keeps the caches of several hub replicas on one PostgreSQL database in
//! step.

use std::{
    any::Any,
    collections::HashMap,
    hash::Hash,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    config::Config,
    crypto::{
        MasterKey,
        signing::{self, KeySet},
    },
    db::{Backend, Db},
    error::{ApiError, ApiResult},
    gate::{directory::Directories, keys::KeyRecord, tokens::TokenCache},
    mail::MailSender,
};

#[derive(Clone)]
pub struct AppState(pub Arc<Inner>);

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

pub struct Inner {
    pub config: Config,
    pub db: Db,
    pub master: MasterKey,
    keys: RwLock<Arc<KeySet>>,
    last_key_reload: Mutex<Option<Instant>>,
    /// Signing-key loads from the database since start (for tests and
    /// diagnostics: however many unknown `kid`s arrive, at most one a second).
    key_reloads: AtomicU64,
    pub tokens: TokenCache,
    /// API keys by SHA-256 of the secret.
    pub api_keys: Cache<String, Arc<KeyRecord>>,
    /// API keys by key_id (for exchanged machine tokens).
    pub api_keys_by_id: Cache<String, Arc<KeyRecord>>,
    /// Effective permissions by persona_id.
    pub permissions: Cache<String, Arc<Vec<String>>>,
    /// When each tenant's credentials stop working (its offboarding
    /// deadline; None while it is not offboarding), by tenant_id.
    pub tenant_deadlines: Cache<String, crate::gate::directory::TenantStanding>,
    /// A tenant's feature flags as the platform area compiles them for
    /// evaluation, by tenant_id (the area's own type: the kernel only holds
    /// and drops them).
    pub feature_flags: Cache<String, Arc<dyn Any + Send + Sync>>,
    /// Database operator tokens by SHA-256 (hex), with when they were read.
    pub ops_tokens: Cache<String, (std::time::Instant, Option<Arc<crate::gate::ops_tokens::OpsToken>>)>,
    /// A tenant's active policy bundle as the governance area compiles it
    /// for the gate's ABAC step (or its absence), by tenant_id.
    pub policies: Cache<String, Arc<dyn Any + Send + Sync>>,
    /// The handlers of signed inbound webhooks, by kind.
    pub inbound: crate::inbound::Registry,
    /// Where sdk-media keeps blob content (`HUB_MEDIA_STORE`).
    pub media: Arc<dyn object_store::ObjectStore>,
    /// None outside development mode without an SMTP relay.
    pub mail: Option<Arc<dyn MailSender>>,
    /// The group-commit writer of audit appends.
    pub audit: crate::audit::Appender,
    /// Wake-ups of the robots' command streams.
    pub streams: crate::bus::Bus,
    /// The areas' answers to the gate's lookups (API keys, permissions,
    /// robot credentials).
    pub directories: Directories,
    /// This replica's leases on credentials' rate windows.
    pub rate: crate::gate::rate::RateLeases,
}

/// What changed, so other replicas can drop what they cached of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalidation {
    ApiKeys,
    Roles,
    SigningKeys,
    /// A tenant's standing (an offboarding started).
    Tenants,
    /// One tenant's feature flags; `None`: every tenant's (the platform's
    /// own flags, which every tenant sees, changed).
    FeatureFlags(Option<String>),
    /// One tenant's active policy bundle.
    Policies(String),
    /// Database operator tokens (one was minted or revoked).
    OpsTokens,
}

/// The payload prefix of a feature-flag invalidation (`feature_flags:` and
/// the tenant id, or `*` for every tenant).
const FEATURE_FLAGS: &str = "feature_flags:";
/// The payload prefix of a policy invalidation (`policies:` and the tenant id).
const POLICIES: &str = "policies:";

impl Invalidation {
    fn payload(&self) -> String {
        match self {
            Invalidation::ApiKeys => "api_keys".into(),
            Invalidation::Roles => "roles".into(),
            Invalidation::SigningKeys => "signing_keys".into(),
            Invalidation::Tenants => "tenants".into(),
            Invalidation::FeatureFlags(tenant) => format!("{FEATURE_FLAGS}{}", tenant.as_deref().unwrap_or("*")),
            Invalidation::Policies(tenant) => format!("{POLICIES}{tenant}"),
            Invalidation::OpsTokens => "ops_tokens".into(),
        }
    }
}

pub const INVALIDATION_CHANNEL: &str = "hub_invalidate";

impl AppState {
    pub async fn new(config: Config, db: Db, master: MasterKey, mail: Option<Arc<dyn MailSender>>, directories: Directories) -> anyhow::Result<AppState> {
        let keys = signing::load_or_create(&db, &master).await?;
        let media = crate::storage::open(&config)?;
        Ok(AppState(Arc::new(Inner {
            media,
            inbound: Default::default(),
            config,
            master,
            keys: RwLock::new(Arc::new(keys)),
            last_key_reload: Mutex::new(None),
            key_reloads: AtomicU64::new(0),
            tokens: TokenCache::default(),
            api_keys: Cache::default(),
            api_keys_by_id: Cache::default(),
            permissions: Cache::default(),
            tenant_deadlines: Cache::default(),
            feature_flags: Cache::default(),
            policies: Cache::default(),
            ops_tokens: Cache::default(),
            audit: crate::audit::Appender::start(db.clone())?,
            db,
            mail,
            streams: Default::default(),
            directories,
            rate: Default::default(),
        })))
    }

    /// The mail sender, or 503 when this hub has none (outside development
    /// mode without `HUB_SMTP_URL`): nothing is issued that cannot be sent.
    pub fn mailer(&self) -> ApiResult<&Arc<dyn MailSender>> {
        self.mail.as_ref().ok_or(ApiError::Unavailable("verification email is not configured on this hub"))
    }

    /// The signing keys in force.
    pub fn keys(&self) -> Arc<KeySet> {
        self.keys.read().expect("keys lock").clone()
    }

    /// How many times the signing keys were loaded from the database.
    pub fn key_reloads(&self) -> u64 {
        self.key_reloads.load(Ordering::Relaxed)
    }

    pub fn set_keys(&self, keys: Arc<KeySet>) {
        *self.keys.write().expect("keys lock") = keys;
        self.tokens.clear();
    }

    /// Rotates the signing key on every replica. The previous key verifies
    /// for `grace`, by default the human token lifetime (RULINGS 3), so
    /// every token minted before the rotation verifies until it expires.
    pub async fn rotate_signing_key(&self, grace: Option<chrono::Duration>, emergency: bool) -> anyhow::Result<crate::crypto::signing::Rotation> {
        let grace = grace.unwrap_or_else(|| chrono::Duration::seconds(self.config.token_ttl_seconds));
        let (rotation, keys) = crate::crypto::signing::rotate(&self.db, &self.master, grace, emergency).await?;
        self.set_keys(keys);
        self.invalidate(Invalidation::SigningKeys).await;
        Ok(rotation)
    }

    /// The operator's emergency rotation ([`crate::security::rotate_signing_key`]),
    /// the previous key verifying for the human token lifetime; every
    /// replica loads the new keys.
    pub async fn rotate_signing_key_recorded(&self, operator: &str, reason: &str, actor_id: &str) -> crate::error::ApiResult<signing::Rotation> {
        let grace = chrono::Duration::seconds(self.config.token_ttl_seconds);
        let rotation = crate::security::rotate_signing_key(&self.db, &self.master, grace, operator, reason, actor_id).await?;
        let keys = signing::load(&self.db, &self.master).await?.ok_or_else(|| anyhow::anyhow!("no current key after rotation"))?;
        self.set_keys(Arc::new(keys));
        self.invalidate(Invalidation::SigningKeys).await;
        Ok(rotation)
    }

    /// Reloads the signing keys from the database (another replica may have
    /// rotated), at most once a second so unknown `kid`s cannot hammer it.
    /// Anyone can send a token with a made-up `kid`, so a reload that finds
    /// the same keys changes nothing, and the verified tokens are forgotten
    /// only when a key this hub knew is gone or its window changed (a key
    /// that merely appeared invalidates no token). True when the keys changed.
    pub async fn reload_keys(&self) -> bool {
        {
            let mut last = self.last_key_reload.lock().expect("reload lock");
            if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
                return false;
            }
            *last = Some(Instant::now());
        }
        self.key_reloads.fetch_add(1, Ordering::Relaxed);
        match signing::load(&self.db, &self.master).await {
            Ok(Some(set)) => {
                let current = self.keys();
                if set.same_keys(&current) {
                    return false;
                }
                let narrowed = set.narrows(&current);
                *self.keys.write().expect("keys lock") = Arc::new(set);
                if narrowed {
                    self.tokens.clear();
                }
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::error!(error = %e, "reloading signing keys");
                false
            }
        }
    }

    /// Drops local caches of `what` and tells the other replicas to do the
    /// same. Call after the change has committed.
    pub async fn invalidate(&self, what: Invalidation) {
        self.invalidate_local(&what);
        if self.db.backend == Backend::Postgres {
            let sent = sqlx::query("SELECT pg_notify($1, $2)").bind(INVALIDATION_CHANNEL).bind(what.payload()).execute(self.db.writer()).await;
            if let Err(e) = sent {
                tracing::error!(error = %e, "broadcasting a cache invalidation");
            }
        }
    }

    pub fn invalidate_local(&self, what: &Invalidation) {
        match what {
            Invalidation::ApiKeys => {
                self.api_keys.clear();
                self.api_keys_by_id.clear();
            }
            Invalidation::Roles => self.permissions.clear(),
            Invalidation::SigningKeys => self.tokens.clear(),
            Invalidation::Tenants => self.tenant_deadlines.clear(),
            Invalidation::FeatureFlags(Some(tenant)) => self.feature_flags.remove(tenant),
            Invalidation::FeatureFlags(None) => self.feature_flags.clear(),
            Invalidation::Policies(tenant) => self.policies.remove(tenant),
            Invalidation::OpsTokens => self.ops_tokens.clear(),
        }
    }

    /// Applies an invalidation received from another replica.
    pub async fn apply_remote(&self, payload: &str) {
        match payload {
            "api_keys" => self.invalidate_local(&Invalidation::ApiKeys),
            "roles" => self.invalidate_local(&Invalidation::Roles),
            "tenants" => self.invalidate_local(&Invalidation::Tenants),
            "ops_tokens" => self.invalidate_local(&Invalidation::OpsTokens),
            "signing_keys" => {
                *self.last_key_reload.lock().expect("reload lock") = None;
                self.reload_keys().await;
            }
            _ => match (payload.strip_prefix(FEATURE_FLAGS), payload.strip_prefix(POLICIES)) {
                (Some("*"), _) => self.invalidate_local(&Invalidation::FeatureFlags(None)),
                (Some(tenant), _) => self.invalidate_local(&Invalidation::FeatureFlags(Some(tenant.to_string()))),
                (None, Some(tenant)) => self.invalidate_local(&Invalidation::Policies(tenant.to_string())),
                (None, None) => self.clear_all(),
            },
        }
    }

    /// Drops every cache (after losing the invalidation channel, say).
    pub fn clear_all(&self) {
        self.api_keys.clear();
        self.api_keys_by_id.clear();
        self.permissions.clear();
        self.tenant_deadlines.clear();
        self.feature_flags.clear();
        self.policies.clear();
        self.ops_tokens.clear();
    }
}

/// A small map with generation-checked inserts: a value loaded before an
/// invalidation is never stored after it, so a revoked key cannot be put
/// back by a request that read it just before the revocation.
pub struct Cache<K, V> {
    map: Mutex<HashMap<K, V>>,
    generation: AtomicU64,
}

impl<K, V> Default for Cache<K, V> {
    fn default() -> Self {
        Cache { map: Mutex::new(HashMap::new()), generation: AtomicU64::new(0) }
    }
}

const CACHE_CAP: usize = 100_000;

impl<K: Hash + Eq, V: Clone> Cache<K, V> {
    pub fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.map.lock().expect("cache lock").get(key).cloned()
    }

    /// The generation to pass to `put` (read it before loading the value).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn put(&self, generation: u64, key: K, value: V) {
        let mut map = self.map.lock().expect("cache lock");
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if map.len() >= CACHE_CAP {
            map.clear();
        }
        map.insert(key, value);
    }

    pub fn clear(&self) {
        let mut map = self.map.lock().expect("cache lock");
        self.generation.fetch_add(1, Ordering::AcqRel);
        map.clear();
    }

    /// Drops one entry. The generation moves on as for `clear`, so a value
    /// of this key loaded before the removal is not stored after it (a
    /// load of another key in flight is not stored either, and is simply
    /// loaded again next time).
    pub fn remove(&self, key: &K) {
        let mut map = self.map.lock().expect("cache lock");
        self.generation.fetch_add(1, Ordering::AcqRel);
        map.remove(key);
    }
}
