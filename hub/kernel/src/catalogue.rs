//! The shapes the catalogue's OpenAPI document describes every answer
//! with: the success envelope `Data<T>`, the list envelope `ListOf<T>`, the
//! error envelope `ErrorBody`; and the `Page` query parameters. `ok`,
//! `created` and `list` serialise through these very types, so the document
//! and the wire cannot differ.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::{
    IntoParams, PartialSchema, ToSchema,
    openapi::{
        RefOr,
        path::{Parameter, ParameterBuilder, ParameterIn},
        schema::{ObjectBuilder, Schema, SchemaType, Type},
    },
};

use crate::{
    db::rows::{Flag, JsonText},
    extract::Page,
};

/// The success envelope: `{ success: true, data }`.
#[derive(Serialize, ToSchema)]
pub struct Data<T> {
    pub success: bool,
    pub data: T,
}

/// The list envelope: `{ success: true, data: [...], total }`, `total`
/// counting every matching row, not just this page.
#[derive(Serialize, ToSchema)]
pub struct ListOf<T> {
    pub success: bool,
    pub data: Vec<T>,
    pub total: i64,
}

/// A 201 answer: the created resource in the success envelope.
pub struct Created<T>(pub T);

/// A route's answer is one of these types, so that the status and the
/// envelope of a success come from the handler's return type: `Data<T>`
/// is 200 `{ success, data }`, `Created<T>` is 201 with the same envelope,
/// `ListOf<T>` is 200 `{ success, data, total }`.
impl<T: Serialize> IntoResponse for Data<T> {
    fn into_response(self) -> Response {
        (StatusCode::OK, Json(self)).into_response()
    }
}

impl<T: Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        (StatusCode::CREATED, Json(Data { success: true, data: self.0 })).into_response()
    }
}

impl<T: Serialize> IntoResponse for ListOf<T> {
    fn into_response(self) -> Response {
        (StatusCode::OK, Json(self)).into_response()
    }
}

/// The error envelope every refusal answers with.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub success: bool,
    /// `ValidationError`, `Unauthorized`, `Forbidden`, `NotFound`,
    /// `Conflict`, `TenantMismatch`, `RateLimited`, ...
    pub error: String,
    pub details: Option<Vec<String>>,
    /// On a scope refusal: the scopes the route needs.
    pub required_scopes: Option<Vec<String>>,
    /// On a scope refusal: what the credential holds.
    pub granted_scopes: Option<Vec<String>>,
    /// On a hard-cap refusal (`HardCapReached`): the sku refused.
    pub sku: Option<String>,
    /// On a hard-cap refusal: the capped period, a UTC month (`YYYY-MM`).
    pub period: Option<String>,
}

impl PartialSchema for JsonText {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(SchemaType::AnyValue).description(Some("a JSON document")).into()
    }
}

impl ToSchema for JsonText {}

impl PartialSchema for Flag {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::Boolean).into()
    }
}

impl ToSchema for Flag {}

impl<const DEFAULT: i64, const MAX: i64, const CLAMP: bool> IntoParams for Page<DEFAULT, MAX, CLAMP> {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let int = |name: &str, description: String, default: i64, min: i64, max: i64| {
            let schema = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(min)).maximum(Some(max)).default(Some(default.into()));
            ParameterBuilder::new().name(name).parameter_in(ParameterIn::Query).description(Some(description)).schema(Some(schema)).build()
        };
        let limit = if CLAMP {
            // One over the range is clamped, not refused.
            let schema = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)).maximum(Some(i64::MAX)).default(Some(DEFAULT.into()));
            let description = format!("rows per page (default {DEFAULT}; clamped to 1..{MAX})");
            ParameterBuilder::new().name("limit").parameter_in(ParameterIn::Query).description(Some(description)).schema(Some(schema)).build()
        } else {
            int("limit", format!("rows per page (default {DEFAULT}, from 1 to {MAX})"), DEFAULT, 1, MAX)
        };
        // A 64-bit count: the largest the hub reads.
        vec![limit, int("offset", "rows to skip".to_string(), 0, 0, i64::MAX)]
    }
}
