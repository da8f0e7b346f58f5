//! What a group module uses, in one import: `use hub_kernel::prelude::*;`.
//! The router and extractors, the row and request derives, JSON, the
//! database and audit helpers, the error envelope, the list extractors, the
//! caller, and `Check`. A name a module defines itself shadows the one here.

pub use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::{get, post, put},
};
pub use serde::{Deserialize, Serialize};
pub use serde_json::{Value, json};
pub use sqlx::FromRow;
pub use utoipa::{IntoParams, ToSchema};
pub use utoipa_axum::{router::OpenApiRouter, routes};

pub use crate::{
    audit::{self, events},
    body::{Body, Lenient},
    catalogue::{Created, Data, ErrorBody, ListOf},
    db::{
        self, Db, Tx,
        change::{Stateful, Written, insert_or_read, next_number},
        rows::{Flag, JsonText},
    },
    error::{ApiError, ApiResult, created, ok},
    extract::{Listing, Page, Params, list},
    gate::{Tenant, TenantCtx},
    state::AppState,
    stored_enum,
    types::{Id, Timestamp},
    validate::{Check, Pattern, canonical_uuid, canonical_uuid_opt, path_id},
};
