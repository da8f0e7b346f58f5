//! Data provenance and ingest: sdk-source-record (claims that are
//! superseded, never changed or deleted), sdk-import (versioned mapping
//! templates), sdk-parsing (contact extraction, nothing stored) and
//! sdk-projection (subjects' snapshots folded from append-only assertion
//! logs, with a content hash).

pub mod import;
pub mod parsing;
pub mod projection;
pub mod source_record;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(source_record::routes()).merge(import::routes()).merge(parsing::routes()).merge(projection::routes())
}
