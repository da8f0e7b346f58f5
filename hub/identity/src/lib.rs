//! Identity and access: authentication bootstrap, tenancy spine, personas
//! and roles, profile bands, identity resolution (steward-approved,
//! reversible person merges), applications and API keys, tenant
//! offboarding; and the `KeyDirectory` through which the gate reads API
//! keys, permissions and tenants' offboarding deadlines.
//!
//! Each table of the area has one owning module (its `//!` doc names them):
//! only the owner's SQL names the table, and the other modules call the
//! owner's functions, passing their transaction along. Rows are read into
//! `FromRow` types that are also the answers' bodies.

pub mod api_keys;
pub mod auth;
pub mod identity_resolver;
pub mod personas;
pub mod profiles;
pub mod roles;
pub mod tenancy;
pub mod tenant_lifecycle;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::{
    db::Db,
    gate::{
        directory::{KeyDirectory, Lookup, TenantStanding},
        keys::KeyRecord,
    },
    state::AppState,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(auth::routes())
        .merge(api_keys::routes())
        .merge(tenancy::routes())
        .merge(personas::routes())
        .merge(profiles::routes())
        .merge(identity_resolver::routes())
        .merge(roles::routes())
        .merge(tenant_lifecycle::routes())
}

/// The gate's lookups over identity's tables.
pub struct Directory;

impl KeyDirectory for Directory {
    fn key_by_hash<'a>(&'a self, db: &'a Db, key_hash: &'a str) -> Lookup<'a, Option<KeyRecord>> {
        Box::pin(api_keys::by_hash(db, key_hash))
    }

    fn key_by_id<'a>(&'a self, db: &'a Db, key_id: &'a str) -> Lookup<'a, Option<KeyRecord>> {
        Box::pin(api_keys::by_id(db, key_id))
    }

    fn permissions<'a>(&'a self, db: &'a Db, persona_id: &'a str) -> Lookup<'a, Vec<String>> {
        Box::pin(roles::resolve(&db.read, persona_id))
    }

    fn tenant_standing<'a>(&'a self, db: &'a Db, tenant_id: &'a str) -> Lookup<'a, TenantStanding> {
        Box::pin(async move {
            Ok(TenantStanding { deadline: tenant_lifecycle::deadline(db, tenant_id).await?, suspended: tenant_lifecycle::suspended(db, tenant_id).await? })
        })
    }
}

/// The sweep that completes offboardings whose deadline has passed, every
/// second (the gate refuses the tenant's credentials from the deadline on
/// in any case; the sweep records the completion).
pub fn spawn_background(state: &AppState) {
    let s = state.clone();
    hub_kernel::db::every(std::time::Duration::from_secs(1), move || {
        let s = s.clone();
        async move {
            if let Err(e) = tenant_lifecycle::complete_due(&s).await {
                tracing::warn!(error = %e, "completing offboardings");
            }
        }
    });
}
