//! Identity and access: authentication bootstrap, tenancy spine, personas
//! and roles, applications and API keys; and the `KeyDirectory` through
//! which the gate reads API keys and permissions.
//!
//! Each table of the area has one owning module (its `//!` doc names them):
//! only the owner's SQL names the table, and the other modules call the
//! owner's functions, passing their transaction along. Rows are read into
//! `FromRow` types that are also the answers' bodies.

pub mod api_keys;
pub mod auth;
pub mod personas;
pub mod roles;
pub mod tenancy;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::{
    db::Db,
    gate::{
        directory::{KeyDirectory, Lookup},
        keys::KeyRecord,
    },
    state::AppState,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(auth::routes()).merge(api_keys::routes()).merge(tenancy::routes()).merge(personas::routes()).merge(roles::routes())
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
}
