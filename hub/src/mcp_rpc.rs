//! The standard MCP endpoint: JSON-RPC 2.0 over streamable HTTP at
//! `POST /mcp`, served by the official SDK (`rmcp`), so that stock MCP
//! clients connect. `tools/list` answers the registry's tools and
//! `tools/call` runs one through [`mcp::dispatch`]: the route's own request
//! with the credential of the HTTP request that carried the call, through
//! the same gate, scopes and tenant checks as a direct call.
//!
//! Stateless (no `Mcp-Session-Id`, so any replica answers any request) and
//! answered as plain JSON. The endpoint itself sits behind the gate: no
//! valid credential, no JSON-RPC.
//!
//! The transport asks a client to list both `application/json` and
//! `text/event-stream` in `Accept`; the SDK refuses a request that does not
//! (406). This endpoint only ever answers JSON, so it serves any client
//! that accepts JSON (`application/json`, `application/*`, `*/*`, or no
//! `Accept` at all) and refuses the others with 406 `NotAcceptable` in the
//! envelope (the official Python SDK's server, in its JSON response mode,
//! likewise asks for `application/json` alone).

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, OnceLock},
};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams, ResourceContents,
        ServerCapabilities, ServerConfig, Tool as McpTool, ToolAnnotations,
    },
    service::RequestContext,
    transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager},
};
use serde_json::Value;
use tower::ServiceExt;
use tracing::Instrument;

use crate::mcp::{self, Answer, Called, Holding, Registry};

/// The MCP server: the registry, seen through the protocol.
#[derive(Clone)]
pub struct Server {
    registry: Registry,
    /// The tools in the protocol's form, built on first use (the registry
    /// is filled once the whole catalogue is).
    tools: Arc<OnceLock<Vec<McpTool>>>,
}

impl Server {
    fn tools(&self) -> &[McpTool] {
        self.tools.get_or_init(|| {
            self.registry
                .list()
                .iter()
                .map(|t| {
                    let schema = t.input_schema.as_object().cloned().unwrap_or_default();
                    McpTool::new(t.name.clone(), t.description.clone(), Arc::new(schema))
                        .with_annotations(ToolAnnotations::new().read_only(!t.writes).destructive(t.method == "DELETE"))
                })
                .collect()
        })
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("platform-hub", env!("CARGO_PKG_VERSION")))
            .with_instructions("Every tenant API of the platform as a tool; a call runs with this connection's credential.")
    }

    async fn list_tools(&self, _: Option<PaginatedRequestParams>, _: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools().to_vec()))
    }

    async fn call_tool(&self, call: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        if !self.registry.contains(&call.name) {
            return Err(ErrorData::invalid_params(format!("no tool named {}: list them with tools/list", call.name), None));
        }
        let parts = context.extensions.get::<axum::http::request::Parts>().ok_or_else(|| ErrorData::internal_error("no HTTP request behind the call", None))?;
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().cloned();
        let arguments = call.arguments.map(Value::Object).unwrap_or(Value::Null);
        // The SDK runs the call in a task of its own: the route's request
        // span goes inside the `/mcp` request's span, as on `/mcp/v1/call`.
        let span = parts.extensions.get::<tracing::Span>().cloned().unwrap_or_else(tracing::Span::none);
        let result = match mcp::dispatch(&self.registry, &parts.headers, peer, &call.name, arguments).instrument(span).await {
            Ok(Called { answer, is_error, held }) => {
                // The share of the in-flight budget stays until `rpc` has sent the answer.
                if let Some(holds) = parts.extensions.get::<Holds>() {
                    holds.0.lock().expect("the holds are never poisoned").push(held);
                }
                let mut result = match answer {
                    Answer::Empty => CallToolResult::success(vec![]),
                    Answer::Json { text, object } => {
                        // The text item for clients that predate structured content, and the object itself.
                        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                        result.structured_content = object;
                        result
                    }
                    Answer::Blob { uri, mime_type, base64 } => CallToolResult::success(vec![ContentBlock::resource(ResourceContents::BlobResourceContents {
                        uri,
                        mime_type: Some(mime_type),
                        blob: base64,
                        meta: None,
                    })]),
                };
                result.is_error = Some(is_error);
                result
            }
            // Arguments the route cannot be called with, or an answer over
            // the limit: the caller's to fix, named in the route's envelope.
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.body().to_string())]),
        };
        Ok(result.into())
    }
}

/// The tower service of the endpoint, for the registry's tools.
pub type Endpoint = StreamableHttpService<Server, NeverSessionManager>;

pub fn endpoint(registry: Registry) -> Endpoint {
    let server = Server { registry, tools: Arc::default() };
    // No Host allow-list: it guards unauthenticated servers on a developer's
    // machine against DNS rebinding, and this endpoint answers nothing
    // without the caller's own bearer credential.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(hub_kernel::error::BODY_LIMIT);
    StreamableHttpService::new(move || Ok(server.clone()), Arc::new(NeverSessionManager::default()), config)
}

/// MCP over JSON-RPC 2.0 (streamable HTTP, stateless): `initialize`,
/// `tools/list`, `tools/call`. The body is one JSON-RPC message; send
/// `Accept: application/json, text/event-stream` (the transport's), or any
/// `Accept` that admits `application/json`, the one media type answered.
#[utoipa::path(post, path = "/mcp", tag = "registry-mcp",
    request_body(content = Object, description = "one JSON-RPC 2.0 request or notification"),
    extensions(("x-concurrency" = json!({"outcome": "exempt", "reason": "JSON-RPC; the tools it calls are the operations above"}))),
    responses(
        (status = 200, description = "the JSON-RPC response", body = Object),
        (status = 202, description = "a notification, accepted"),
        (status = 406, description = "the Accept header does not admit application/json", body = hub_kernel::catalogue::ErrorBody),
    ))]
pub async fn rpc(State(endpoint): State<Endpoint>, req: Request) -> Response {
    if !accepts_json(req.headers()) {
        return hub_kernel::error::ApiError::NotAcceptable("this endpoint answers application/json, which the Accept header does not admit").into_response();
    }
    // rmcp parses the message with serde_json, whose own recursion limit a
    // workspace build can switch off (see `hub_kernel::nesting`): the
    // nesting is bounded here, before any parser sees the message.
    let (mut parts, body) = req.into_parts();
    // The SDK wants both media types listed. It answers this client in
    // JSON, which it accepts: the JSON response mode, and no tool sends a
    // message before its result (which would turn the answer into a stream).
    parts.headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    let Ok(bytes) = axum::body::to_bytes(body, hub_kernel::error::BODY_LIMIT).await else {
        return hub_kernel::error::ApiError::PayloadTooLarge.into_response();
    };
    if let Err(refused) = hub_kernel::nesting::check_json(&bytes, "the JSON-RPC message") {
        return refused.into_response();
    }
    let mut req = Request::from_parts(parts, axum::body::Body::from(bytes));
    let holds = Holds::default();
    req.extensions_mut().insert(holds.clone());
    req.extensions_mut().insert(tracing::Span::current());
    let response = endpoint.oneshot(req).await.into_response();
    let held = std::mem::take(&mut *holds.0.lock().expect("the holds are never poisoned"));
    if held.is_empty() {
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Holding::wrap(body, held))
}

/// Whether `Accept` admits `application/json` (RFC 9110, 12.5.1): the most
/// specific range that covers it decides (`application/json`, then
/// `application/*`, then `*/*`), a weight of 0 refusing; no `Accept` (or
/// one listing nothing) admits anything.
fn accepts_json(headers: &HeaderMap) -> bool {
    let mut listed = false;
    // The specificity of the best range covering JSON, and whether it admits it.
    let mut best: Option<(u8, bool)> = None;
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            listed = true;
            continue;
        };
        for range in value.split(',') {
            let mut parameters = range.split(';');
            let essence = parameters.next().unwrap_or_default().trim();
            if essence.is_empty() {
                continue;
            }
            listed = true;
            let specificity = if essence.eq_ignore_ascii_case("application/json") {
                3
            } else if essence.eq_ignore_ascii_case("application/*") {
                2
            } else if essence == "*/*" {
                1
            } else {
                continue;
            };
            let weight_zero = parameters
                .any(|p| p.split_once('=').is_some_and(|(name, q)| name.trim().eq_ignore_ascii_case("q") && q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)));
            best = match best {
                Some((s, admitted)) if s > specificity => Some((s, admitted)),
                Some((s, admitted)) if s == specificity => Some((s, admitted || !weight_zero)),
                _ => Some((specificity, !weight_zero)),
            };
        }
    }
    !listed || best.is_some_and(|(_, admitted)| admitted)
}

/// The shares of the in-flight budget that the tool calls of one `/mcp`
/// request took: the SDK builds the response from the tool's result, so
/// the shares come back to `rpc` this way, through the request's
/// extensions that the SDK hands to the tool.
#[derive(Clone, Default)]
struct Holds(Arc<Mutex<Vec<tokio::sync::OwnedSemaphorePermit>>>);
