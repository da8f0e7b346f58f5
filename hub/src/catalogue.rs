//! The catalogue, machine-readable: the OpenAPI 3.1 document the areas'
//! annotated handlers produce, completed here with what the gate decides
//! (security scheme, required scope, whether the operation writes, the
//! error answers), and the capability index derived from it. Both are
//! built once at start and served as they are.

use std::sync::{Arc, OnceLock};

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::header,
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};
use utoipa::openapi::{OpenApi, extensions::ExtensionsBuilder};
use utoipa_axum::{router::OpenApiRouter, routes};

use hub_kernel::{
    catalogue::ErrorBody,
    gate::{self, scope},
    state::AppState,
};

/// `info.version` of the OpenAPI document.
pub const API_VERSION: &str = "2026.08.02";
/// Version of the capability index.
pub const INDEX_VERSION: &str = "2026.07.21";

/// The HTTP methods an operation of the document may have.
pub const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// Marks every operation of an area's router with the area it belongs to.
pub fn area(name: &str, mut router: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
    for item in router.get_openapi_mut().paths.paths.values_mut() {
        for op in [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten() {
            let mut ext = op.extensions.take().unwrap_or_default();
            ext.merge(ExtensionsBuilder::new().add("x-area", name).build());
            op.extensions = Some(ext);
        }
    }
    router
}

/// The served document: the handlers' paths and schemas, with for each
/// operation its security, `x-required-scope`, `x-writes` and the error
/// envelope answers.
pub fn document(api: OpenApi) -> Value {
    let mut doc = serde_json::to_value(&api).expect("the OpenAPI document serialises");
    doc["openapi"] = json!("3.1.0");
    doc["info"] = json!({
        "title": "Platform hub",
        "version": API_VERSION,
        "description": "The tenant API catalogue and the operator routes. Every error answers the envelope `ErrorBody`.",
    });
    // Relative to where the document is served: the hub answers every
    // route beside `/openapi.json`.
    doc["servers"] = json!([{ "url": "/", "description": "this hub" }]);
    let error_schema = serde_json::to_value(<ErrorBody as utoipa::PartialSchema>::schema()).expect("schema serialises");
    doc["components"]["schemas"]["ErrorBody"] = error_schema;
    doc["components"]["securitySchemes"] = json!({
        "bearer": { "type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "a person's ES256 token (POST /api/auth/login) or a machine token (POST /api/auth/token)" },
        "apiKey": { "type": "http", "scheme": "bearer", "description": "an API key, pk_live_… or pk_test_…, as the bearer value" },
        "robotCredential": { "type": "http", "scheme": "bearer", "description": "a per-robot credential, rc_…, as the bearer value" },
        "adminToken": { "type": "apiKey", "in": "header", "name": "x-admin-ops-token" },
    });
    hub_kernel::contract::non_blank_required_strings(&mut doc);
    hub_kernel::contract::formatted_strings_asserted(&mut doc);
    hub_kernel::contract::required_values_not_null(&mut doc);
    let schemas = doc["components"]["schemas"].clone();
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            for method in METHODS {
                if let Some(op) = item.get_mut(method) {
                    complete(path, method, op);
                    optional_body(op, &schemas);
                }
            }
        }
    }
    doc
}

/// A JSON body whose type has no required field may be left out: `Body`
/// takes an absent body as the empty object, so the document says the
/// body is not required, as the type does.
fn optional_body(op: &mut Value, schemas: &Value) {
    let Some(body) = op.get_mut("requestBody") else { return };
    // Raw content (a media upload): no bytes is empty content.
    if body["content"].as_object().is_some_and(|c| c.len() == 1 && c.contains_key("application/octet-stream")) {
        body["required"] = json!(false);
        return;
    }
    let schema = &body["content"]["application/json"]["schema"];
    // Any JSON value (a body read leniently, such as the emergency
    // rotation's): no body is one too.
    if schema.as_object().is_some_and(|s| !s.contains_key("$ref") && !s.contains_key("type") && !s.contains_key("properties")) {
        body["required"] = json!(false);
        return;
    }
    let Some(name) = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) else { return };
    let resolved = &schemas[name];
    if resolved["type"] == "object" && resolved["required"].as_array().is_none_or(|r| r.is_empty()) {
        body["required"] = json!(false);
    }
}

fn error(description: &str) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } } })
}

/// An operation's id, unique in the document: its group and its handler's
/// name, in the characters every client generator and MCP client accepts.
pub fn operation_id(tag: &str, handler: &str) -> String {
    format!("{tag}_{handler}").chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

fn complete(path: &str, method: &str, op: &mut Value) {
    let handler = op["operationId"].as_str().unwrap_or(method).to_string();
    op["operationId"] = json!(operation_id(op["tags"][0].as_str().unwrap_or("hub"), &handler));
    let admin = gate::is_operator_route(path);
    let robot = gate::is_robot_route(path);
    let public = !robot && gate::is_public(path);
    op["security"] = match () {
        _ if admin => json!([{ "adminToken": [] }]),
        _ if robot => json!([{ "robotCredential": [] }]),
        _ if public => json!([]),
        _ => json!([{ "bearer": [] }, { "apiKey": [] }]),
    };
    op["x-writes"] = json!(method != "get");
    if !admin
        && !robot
        && !public
        && let Some(required) = scope::required(&method.to_uppercase(), path)
    {
        op["x-required-scope"] = json!(required);
    }
    let has_body = op.get("requestBody").is_some();
    let responses = op["responses"].as_object_mut().expect("every operation declares its responses");
    let mut add = |status: &str, description: &str| {
        responses.entry(status.to_string()).or_insert_with(|| error(description));
    };
    add("400", "ValidationError: the request is malformed or fails validation");
    if has_body {
        add("413", "PayloadTooLarge: the body is larger than the route takes");
    }
    if !public {
        add("401", "Unauthorized: no credential, or one that is invalid, expired or revoked");
    }
    if !public && !admin {
        add("403", "Forbidden: the credential lacks the scope or role (required_scopes, granted_scopes)");
        add("423", "Locked: the operator has suspended the credential's tenant");
        add("429", "RateLimited: the credential's per-minute limit is spent (Retry-After)");
    }
    if path.contains('{') {
        add("404", "NotFound: no such resource for this caller");
    }
    if !public && method != "get" {
        add("409", "Conflict: the write contradicts the resource's state (a duplicate, or a state it cannot leave)");
    }
    add("500", "InternalError: the cause is in the server log only");
}

/// The capability index: every group with its area, every API with method,
/// path, required scope and whether it writes.
pub fn index(doc: &Value) -> Value {
    let mut groups: Map<String, Value> = Map::new();
    let mut apis = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let group = op["tags"][0].as_str().unwrap_or("hub").to_string();
            let area = op["x-area"].as_str().unwrap_or("hub").to_string();
            groups.entry(group.clone()).or_insert_with(|| json!({ "group": group, "area": area }));
            apis.push(json!({
                "group": group, "method": method.to_uppercase(), "path": path,
                "required_scope": op.get("x-required-scope").cloned().unwrap_or(Value::Null),
                "writes": op["x-writes"], "operation_id": op["operationId"],
            }));
        }
    }
    json!({ "version": INDEX_VERSION, "groups": groups.into_values().collect::<Vec<_>>(), "apis": apis })
}

/// The two documents, each serialised once, set when the router is built
/// (their own routes are described in them).
#[derive(Clone, Default)]
pub struct Published(Arc<OnceLock<(Bytes, Bytes)>>);

impl Published {
    pub fn set(&self, doc: &Value) {
        let bytes = |v: &Value| Bytes::from(serde_json::to_vec(v).expect("the documents serialise"));
        let _ = self.0.set((bytes(doc), bytes(&index(doc))));
    }

    fn json(bytes: &Bytes) -> Response {
        ([(header::CONTENT_TYPE, "application/json")], bytes.clone()).into_response()
    }
}

/// This document: the OpenAPI 3.1 description of every route.
#[utoipa::path(get, path = "/openapi.json", tag = "catalogue", responses((status = 200, description = "the OpenAPI document", body = Object)))]
async fn openapi(State(published): State<Published>) -> Response {
    Published::json(&published.0.get().expect("published at start").0)
}

/// The capability index: every group with its area, every API with method,
/// path, required scope and whether it writes.
#[utoipa::path(get, path = "/capabilities.json", tag = "catalogue", responses((status = 200, description = "the capability index", body = Object)))]
async fn capabilities(State(published): State<Published>) -> Response {
    Published::json(&published.0.get().expect("published at start").1)
}

/// Liveness: 200 whatever credential is sent, or none.
#[utoipa::path(get, path = "/health", tag = "catalogue", responses((status = 200, description = "the hub is up", body = Object)))]
async fn health() -> Json<Value> {
    Json(health_answer())
}

/// `/health`'s answer (also a starting hub's).
pub(crate) fn health_answer() -> Value {
    json!({ "success": true, "data": { "status": "ok" } })
}

/// The routes of the catalogue's own documents and of `/health`.
pub fn routes<S: Clone + Send + Sync + 'static>(published: Published) -> OpenApiRouter<S> {
    OpenApiRouter::new().routes(routes!(health)).routes(routes!(openapi)).routes(routes!(capabilities)).with_state(published)
}
