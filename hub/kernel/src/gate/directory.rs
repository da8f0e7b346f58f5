//! What the gate asks of the areas that own credentials and roles. The
//! kernel declares these lookups; the identity and platform areas implement
//! them over their own tables, and the hub binary injects them at start, so
//! the gate knows no group and no group's table.

use std::{future::Future, pin::Pin, sync::Arc};

use super::keys::KeyRecord;
use crate::{db::Db, error::ApiResult, state::AppState};

/// A boxed lookup future: the trait stays object-safe.
pub type Lookup<'a, T> = Pin<Box<dyn Future<Output = ApiResult<T>> + Send + 'a>>;

/// API keys and role grants (implemented by the identity area).
pub trait KeyDirectory: Send + Sync + 'static {
    /// The key whose secret hashes (SHA-256, hex) to `key_hash`, whatever
    /// its status: the gate decides what is usable.
    fn key_by_hash<'a>(&'a self, db: &'a Db, key_hash: &'a str) -> Lookup<'a, Option<KeyRecord>>;
    /// The key `key_id` (behind an exchanged machine token).
    fn key_by_id<'a>(&'a self, db: &'a Db, key_id: &'a str) -> Lookup<'a, Option<KeyRecord>>;
    /// A persona's effective permissions: its roles' grants with their
    /// parents' and the tenant's overrides; empty for an unknown or
    /// inactive persona.
    fn permissions<'a>(&'a self, db: &'a Db, persona_id: &'a str) -> Lookup<'a, Vec<String>>;
    /// Whether the credentials of tenant `tenant_id` work: the deadline
    /// of its offboarding and whether the operator suspended it (a
    /// sandbox's standing is its tenant's).
    fn tenant_standing<'a>(&'a self, db: &'a Db, tenant_id: &'a str) -> Lookup<'a, TenantStanding>;
}

/// What decides whether a tenant's credentials work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantStanding {
    /// When its offboarding completes (credentials stop then); None while
    /// it is not offboarding.
    pub deadline: Option<chrono::DateTime<chrono::Utc>>,
    /// Suspended by the operator: credentials answer 423 until resumed.
    pub suspended: bool,
}

/// Relationships between personas (implemented by the governance area's
/// sdk-rebac): the gate's ReBAC step.
pub trait RelationDirectory: Send + Sync + 'static {
    /// Whether `subject` reaches `target` through relationships of kind
    /// `relation` in `tenant` (within the default budget).
    fn reaches<'a>(&'a self, db: &'a Db, tenant: &'a str, subject: &'a str, relation: &'a str, target: &'a str) -> Lookup<'a, bool>;
}

/// What the gate's ABAC step asks about one request.
pub struct AbacRequest<'a> {
    pub tenant_id: &'a str,
    /// The acting persona (a person's primary one, a key's synthetic one).
    pub persona_id: &'a str,
    /// `human` or `service`.
    pub actor_kind: &'a str,
    /// The scope the route needs (the action).
    pub action: &'a str,
    /// The matched route template (the resource).
    pub route: &'a str,
    pub method: &'a str,
    pub path: &'a str,
}

/// The tenant's policies (implemented by the governance area's
/// sdk-policy): the gate's ABAC step.
pub trait PolicyDirectory: Send + Sync + 'static {
    /// None when the tenant's active bundle (if any) allows the request,
    /// otherwise why it refuses.
    fn refusal<'a>(&'a self, state: &'a AppState, request: AbacRequest<'a>) -> Lookup<'a, Option<String>>;
}

/// The directories the hub was started with.
#[derive(Clone)]
pub struct Directories {
    pub keys: Arc<dyn KeyDirectory>,
    pub relations: Arc<dyn RelationDirectory>,
    pub policies: Arc<dyn PolicyDirectory>,
}
