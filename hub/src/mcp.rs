//! registry-mcp: every tenant API as an MCP tool. `GET /api/registry/tools`
//! lists them (name, description, the JSON Schema of the input, whether it
//! writes), derived from the OpenAPI document; `POST /mcp/v1/call` runs one
//! by sending the HTTP request its route takes through the whole router,
//! with the caller's own credential: the same gate, scopes and tenant
//! checks as a direct call, and a tool the credential may not call is
//! refused by the gate before any handler runs.

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock},
};

use axum::{
    Json, Router,
    body::Body as HttpBody,
    extract::{ConnectInfo, FromRequest, Request, State},
    http::{HeaderMap, Method, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tower::ServiceExt;
use utoipa::ToSchema;

use hub_kernel::{
    catalogue::ListOf,
    error::{ApiError, ApiResult, Body},
    extract::list,
};

/// One tool: a tenant operation of the catalogue.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// JSON Schema of `arguments`: the path and query parameters by name,
    /// and `body` for the request body.
    #[serde(rename = "inputSchema")]
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// Whether the tool changes state (the write-tool set).
    pub writes: bool,
    pub method: String,
    pub path: String,
    #[serde(skip)]
    query: Vec<String>,
}

/// The tools, by name, and the router they dispatch through.
struct Tools {
    list: Vec<Tool>,
    by_name: BTreeMap<String, usize>,
    router: Router,
}

/// The registry, set once the router is built (the tools' own routes are
/// part of it).
#[derive(Clone, Default)]
pub struct Registry(Arc<OnceLock<Tools>>);

impl Registry {
    pub fn set(&self, list: Vec<Tool>, router: Router) {
        let by_name = list.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        let _ = self.0.set(Tools { list, by_name, router });
    }

    fn get(&self) -> &Tools {
        self.0.get().expect("the registry is set before the hub serves")
    }

    /// The tools, in path and method order.
    pub fn list(&self) -> &[Tool] {
        &self.get().list
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get().by_name.contains_key(name)
    }
}

/// Replaces `$ref`s into the document's components by the schemas they
/// name, so a tool's input schema stands alone.
fn inline(schema: &Value, components: &Value, depth: usize) -> Value {
    match schema {
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str)
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                return if depth > 8 { json!({}) } else { inline(&components["schemas"][name], components, depth + 1) };
            }
            Value::Object(map.iter().map(|(k, v)| (k.clone(), inline(v, components, depth))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline(v, components, depth)).collect()),
        other => other.clone(),
    }
}

/// The tools of a completed OpenAPI document: every operation a tenant
/// credential calls (not public, operator or robot routes, nor the
/// registry's own), in path and method order.
pub fn tools(doc: &Value) -> Vec<Tool> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in crate::catalogue::METHODS {
            let Some(op) = item.get(method) else { continue };
            let tenant = op["security"].as_array().is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()));
            // The registry's own routes are not tools of it.
            if !tenant || op["tags"][0] == "registry-mcp" {
                continue;
            }
            let mut properties = Map::new();
            let mut required = Vec::new();
            let mut query = Vec::new();
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap_or_default().to_string();
                let mut schema = inline(&p["schema"], &doc["components"], 0);
                if let Some(d) = p["description"].as_str() {
                    schema["description"] = json!(d);
                }
                if p["required"] == true {
                    required.push(json!(name));
                }
                if p["in"] == "query" {
                    query.push(name.clone());
                }
                properties.insert(name, schema);
            }
            if let Some(body) = op["requestBody"]["content"]["application/json"]["schema"].as_object() {
                properties.insert("body".into(), inline(&Value::Object(body.clone()), &doc["components"], 0));
                if op["requestBody"]["required"] == true {
                    required.push(json!("body"));
                }
            }
            let summary = op["summary"].as_str().or(op["description"].as_str()).unwrap_or_default();
            out.push(Tool {
                // The operation id is unique and already in the tool-name alphabet.
                name: op["operationId"].as_str().unwrap_or_default().to_string(),
                description: format!("{} ({} {path})", summary.trim_end_matches('.'), method.to_uppercase()),
                input_schema: json!({ "type": "object", "properties": properties, "required": required }),
                writes: method != "get",
                method: method.to_uppercase(),
                path: path.clone(),
                query,
            });
        }
    }
    out
}

/// Every tenant API as an MCP tool.
#[utoipa::path(get, path = "/api/registry/tools", tag = "registry-mcp",
    responses((status = 200, description = "the tools, in path and method order", body = ListOf<Tool>)))]
pub async fn list_tools(State(registry): State<Registry>) -> Response {
    let tools = registry.list().to_vec();
    let total = tools.len() as i64;
    list(tools, total)
}

#[derive(Deserialize, ToSchema)]
pub struct Call {
    /// A tool name from `GET /api/registry/tools`.
    pub name: String,
    /// The tool's input (its `inputSchema`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub arguments: Value,
}

/// The MCP content envelope.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallResult {
    /// One `text` item: the route's JSON answer.
    #[schema(value_type = Vec<Object>)]
    pub content: Vec<Value>,
    /// True when the route refused or failed (any status from 400).
    #[serde(rename = "isError")]
    pub is_error: bool,
}

impl CallResult {
    /// The route's JSON answer, as text.
    pub fn text(&self) -> &str {
        self.content.first().and_then(|c| c["text"].as_str()).unwrap_or_default()
    }
}

/// Calls a tool: the request its route takes, with the caller's credential.
#[utoipa::path(post, path = "/mcp/v1/call", tag = "registry-mcp", request_body = Call,
    responses((status = 200, description = "the tool's answer; isError when the route refused it", body = CallResult)))]
pub async fn call(State(registry): State<Registry>, req: Request) -> ApiResult<Response> {
    let peer = req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().cloned();
    let headers = req.headers().clone();
    let Body(call) = Body::<Call>::from_request(req, &()).await?;
    Ok(Json(dispatch(&registry, &headers, peer, &call.name, call.arguments).await?).into_response())
}

/// Sends the tool's request through the router and wraps its answer.
pub async fn dispatch(
    registry: &Registry,
    headers: &HeaderMap,
    peer: Option<ConnectInfo<std::net::SocketAddr>>,
    name: &str,
    arguments: Value,
) -> ApiResult<CallResult> {
    let Tools { list, by_name, router } = registry.get();
    let tool =
        by_name.get(name).map(|i| &list[*i]).ok_or_else(|| ApiError::invalid(format!("no tool named {name}: list them with GET /api/registry/tools")))?;
    let arguments = match arguments {
        Value::Null => Map::new(),
        Value::Object(m) => m,
        _ => return Err(ApiError::invalid("arguments must be an object")),
    };
    let text = |v: &Value| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
    let mut missing = Vec::new();
    let path: Vec<String> = tool
        .path
        .split('/')
        .map(|seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(p) => match arguments.get(p) {
                Some(v) => url::form_urlencoded::byte_serialize(text(v).as_bytes()).collect(),
                None => {
                    missing.push(format!("arguments.{p} is required"));
                    String::new()
                }
            },
            None => seg.to_string(),
        })
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::Validation(missing));
    }
    let query: Vec<(String, String)> = tool.query.iter().filter_map(|q| arguments.get(q).map(|v| (q.clone(), text(v)))).collect();
    let mut uri = path.join("/");
    if !query.is_empty() {
        uri.push('?');
        uri.push_str(&serde_urlencoded::to_string(&query).map_err(|e| ApiError::invalid(e.to_string()))?);
    }
    let method = Method::from_bytes(tool.method.as_bytes()).expect("an HTTP method");
    let mut builder = Request::builder().method(method).uri(uri);
    if let Some(auth) = headers.get(header::AUTHORIZATION) {
        builder = builder.header(header::AUTHORIZATION, auth);
    }
    let body = match arguments.get("body") {
        Some(b) if tool.writes => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            HttpBody::from(b.to_string())
        }
        None if tool.writes => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            HttpBody::from("{}")
        }
        _ => HttpBody::empty(),
    };
    let mut request = builder.body(body).map_err(|e| ApiError::invalid(e.to_string()))?;
    if let Some(peer) = peer {
        request.extensions_mut().insert(peer);
    }
    let response = router.clone().oneshot(request).await.expect("the router is infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), hub_kernel::error::BODY_LIMIT * 8)
        .await
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("reading a tool's answer: {e}")))?;
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes)));
    Ok(CallResult { content: vec![json!({ "type": "text", "text": answer.to_string() })], is_error: status.as_u16() >= 400 })
}

/// The registry's routes, with the OpenAPI description of each: the two
/// of the tenant document and the standard JSON-RPC endpoint.
pub fn routes<S: Clone + Send + Sync + 'static>(registry: Registry) -> utoipa_axum::router::OpenApiRouter<S> {
    use utoipa_axum::{router::OpenApiRouter, routes};
    let rpc = OpenApiRouter::new().routes(routes!(crate::mcp_rpc::rpc)).with_state(crate::mcp_rpc::endpoint(registry.clone()));
    OpenApiRouter::new().routes(routes!(list_tools)).routes(routes!(call)).with_state(registry).merge(rpc)
}
