//! Data provenance and ingest: so far sdk-source-record (claims that are
//! superseded, never changed or deleted) and sdk-import (versioned mapping
//! templates).

pub mod import;
pub mod source_record;

use utoipa_axum::router::OpenApiRouter;

use hub_kernel::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(source_record::routes()).merge(import::routes())
}
