//! registry-mcp: every tenant API as an MCP tool. `GET /api/registry/tools`
//! lists them (name, description, the JSON Schema of the input, whether it
//! writes), derived from the OpenAPI document; `POST /mcp/v1/call` runs one
//! by sending the HTTP request its route takes through the whole router,
//! with the caller's own credential: the same gate, scopes and tenant
//! checks as a direct call, and a tool the credential may not call is
//! refused by the gate before any handler runs.

use std::{
    collections::BTreeMap,
    pin::Pin,
    sync::{Arc, OnceLock},
    task::{Context as TaskContext, Poll},
};

use axum::{
    Router,
    body::Body as HttpBody,
    extract::{ConnectInfo, FromRequest, Request, State},
    http::{HeaderMap, Method, header},
    response::Response,
};
use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;
use utoipa::ToSchema;

use hub_kernel::{
    body::Lenient,
    catalogue::ListOf,
    error::{ApiError, ApiResult},
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
    /// The hub's public URL: a binary answer's resource URI is its route's
    /// URL under it.
    public_url: String,
}

/// The registry, set once the router is built (the tools' own routes are
/// part of it).
#[derive(Clone, Default)]
pub struct Registry(Arc<OnceLock<Tools>>);

impl Registry {
    pub fn set(&self, list: Vec<Tool>, router: Router, public_url: &str) {
        let by_name = list.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        let public_url = public_url.trim_end_matches('/').to_string();
        let _ = self.0.set(Tools { list, by_name, router, public_url });
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
/// credential calls (not public, operator or robot routes, event streams,
/// nor the registry's own), in path and method order.
pub fn tools(doc: &Value) -> Vec<Tool> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in crate::catalogue::METHODS {
            let Some(op) = item.get(method) else { continue };
            let tenant = op["security"].as_array().is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()));
            // The registry's own routes are not tools of it, nor is an
            // endless event stream (`GET /api/commands/watch`) a call.
            let streams = op["responses"]["200"]["content"].get("text/event-stream").is_some();
            if !tenant || streams || op["tags"][0] == "registry-mcp" {
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
pub async fn list_tools(State(registry): State<Registry>) -> ListOf<Tool> {
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

/// The most a tool call carries back, in bytes: a JSON answer's own text,
/// or the base64 form of any other answer (so at most 3 MiB of binary
/// content). A larger answer is refused, read no further than this, so a
/// call for a large media blob costs the hub no more than the limit; such
/// content is read from its own route, which streams it.
pub const ANSWER_LIMIT: usize = 4 * 1024 * 1024;

/// The bytes of tool answers the whole process holds at once, each counted
/// at the size of its base64 form: four binary answers at the limit. A
/// call's share is taken once its route has answered and
/// kept until its answer has been sent, so concurrent large calls queue
/// instead of multiplying memory (an answer held is a few times its size
/// while it is read, encoded and written out).
pub const ANSWERS_IN_FLIGHT: usize = 4 * ANSWER_LIMIT;

/// The budget of [`ANSWERS_IN_FLIGHT`], one permit a byte.
fn in_flight() -> &'static Arc<Semaphore> {
    static BUDGET: OnceLock<Arc<Semaphore>> = OnceLock::new();
    BUDGET.get_or_init(|| Arc::new(Semaphore::new(ANSWERS_IN_FLIGHT)))
}

/// A tool's answer, in the form a tool result carries it.
#[derive(Debug)]
pub enum Answer {
    /// No content (an empty body, as a `204` answers).
    Empty,
    /// A JSON answer: its text as the route wrote it (serialised once, by
    /// the route), and the value itself when it is an object, which is
    /// what MCP's `structuredContent` may hold.
    Json { text: String, object: Option<Value> },
    /// Any other answer (media content, a non-JSON body): the route's
    /// content type and the bytes in base64, never decoded as text.
    Blob { uri: String, mime_type: String, base64: String },
}

/// What a tool call answered, with its share of the in-flight budget,
/// returned to the budget when this is dropped.
#[derive(Debug)]
pub struct Called {
    pub answer: Answer,
    /// True when the route refused or failed (any status from 400).
    pub is_error: bool,
    pub held: OwnedSemaphorePermit,
}

/// One item of a tool result's `content`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToolContent {
    /// The route's JSON answer, as text.
    Text { text: String },
    /// The route's non-JSON answer as an embedded MCP resource.
    Resource { resource: BlobResource },
}

/// An MCP blob resource: the content of the route's URL in base64.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlobResource {
    /// The route's URL under the hub's public URL.
    pub uri: String,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// The bytes, in standard base64 with padding.
    pub blob: String,
}

/// The MCP tool result envelope.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallResult {
    /// For a JSON answer one `text` item holding it; for any other content
    /// one `resource` item holding it in base64; nothing for an empty one.
    pub content: Vec<ToolContent>,
    /// A JSON object answer itself (the same value as the text item).
    #[serde(rename = "structuredContent", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub structured_content: Option<Value>,
    /// True when the route refused or failed (any status from 400).
    #[serde(rename = "isError")]
    pub is_error: bool,
}

impl From<Answer> for CallResult {
    fn from(answer: Answer) -> CallResult {
        let (content, structured_content) = match answer {
            Answer::Empty => (vec![], None),
            Answer::Json { text, object } => (vec![ToolContent::Text { text }], object),
            Answer::Blob { uri, mime_type, base64 } => (vec![ToolContent::Resource { resource: BlobResource { uri, mime_type, blob: base64 } }], None),
        };
        CallResult { content, structured_content, is_error: false }
    }
}

/// A response body that keeps a share of the in-flight budget until the
/// body has been sent, handing its data on in slices of 64 KiB: the HTTP
/// server queues a bounded number of slices before it asks for more, so
/// the share goes back only when little of the answer is left unsent.
pub struct Holding<B> {
    inner: B,
    pending: Option<axum::body::Bytes>,
    _held: Vec<OwnedSemaphorePermit>,
}

impl Holding<HttpBody> {
    pub fn wrap(inner: HttpBody, held: Vec<OwnedSemaphorePermit>) -> HttpBody {
        HttpBody::new(Holding { inner, pending: None, _held: held })
    }
}

impl<B: http_body::Body<Data = axum::body::Bytes> + Unpin> http_body::Body for Holding<B> {
    type Data = axum::body::Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        const SLICE: usize = 64 * 1024;
        loop {
            if let Some(data) = self.pending.as_mut().filter(|d| !d.is_empty()) {
                let slice = data.split_to(SLICE.min(data.len()));
                return Poll::Ready(Some(Ok(http_body::Frame::data(slice))));
            }
            self.pending = None;
            match std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.pending = Some(data),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                other => return Poll::Ready(other),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.as_ref().is_none_or(|d| d.is_empty()) && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let pending = self.pending.as_ref().map_or(0, |d| d.len() as u64);
        let inner = self.inner.size_hint();
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(inner.lower() + pending);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + pending);
        }
        hint
    }
}

/// Calls a tool: the request its route takes, with the caller's credential.
#[utoipa::path(post, path = "/mcp/v1/call", tag = "registry-mcp", request_body = Call,
    extensions(("x-concurrency" = json!({"outcome": "exempt", "reason": "a dispatcher: it sends the request of the operation its tool names, whose own marker declares the outcome"}))),
    responses(
        (status = 200, description = "the tool's answer; isError when the route refused it", body = CallResult),
        (status = 400, description = "an unknown tool, arguments the route cannot be called with, or an answer over the limit of what a tool call carries back (`ANSWER_LIMIT`, 4 MiB)", body = hub_kernel::catalogue::ErrorBody),
    ))]
pub async fn call(State(registry): State<Registry>, req: Request) -> ApiResult<Response> {
    let peer = req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().cloned();
    let headers = req.headers().clone();
    let Lenient(call) = Lenient::<Call>::from_request(req, &()).await?;
    let Called { answer, is_error, held } = dispatch(&registry, &headers, peer, &call.name, call.arguments).await?;
    let result = CallResult { is_error, ..answer.into() };
    let body = serde_json::to_vec(&result).map_err(|e| ApiError::Internal(e.into()))?;
    drop(result);
    let mut response = Response::new(Holding::wrap(HttpBody::from(body), vec![held]));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    Ok(response)
}

/// Sends the tool's request through the router and reads its answer, at
/// most [`ANSWER_LIMIT`] of it.
pub async fn dispatch(
    registry: &Registry,
    headers: &HeaderMap,
    peer: Option<ConnectInfo<std::net::SocketAddr>>,
    name: &str,
    arguments: Value,
) -> ApiResult<Called> {
    let Tools { list, by_name, router, public_url } = registry.get();
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
    let mut builder = Request::builder().method(method).uri(&uri);
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
    let is_error = response.status().as_u16() >= 400;
    let too_large = |size: Option<u64>| {
        let size = size.map(|n| format!(" ({n} bytes)")).unwrap_or_default();
        ApiError::Validation(vec![format!(
            "the answer of {name}{size} is over what a tool call carries back: {ANSWER_LIMIT} bytes of JSON, or of base64 for other content ({} bytes of it); call {} {uri} directly",
            ANSWER_LIMIT / 4 * 3,
            tool.method
        )])
    };

    // A JSON answer is carried as it is; anything else in base64, which
    // is a third larger, so it may have at most three quarters of the limit.
    let mime_type = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/octet-stream").to_string();
    let json_typed = is_json(&mime_type);
    let limit = if json_typed { ANSWER_LIMIT } else { ANSWER_LIMIT / 4 * 3 };
    let declared = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .or_else(|| http_body::Body::size_hint(response.body()).exact());
    if declared.is_some_and(|n| n > limit as u64) {
        // Refused before a byte is read: the route's stream is dropped here.
        return Err(too_large(declared));
    }
    let bound = declared.map_or(limit, |n| n as usize);
    // An answer is counted at the size of its base64 form, the larger of
    // the two: content labelled JSON may turn out not to be.
    let share = |n: usize| n.div_ceil(3) * 4;
    let mut held = in_flight().clone().acquire_many_owned(share(bound).max(1) as u32).await.expect("the budget is never closed");

    let Some(bytes) = read_at_most(response.into_body(), limit, declared).await? else {
        return Err(too_large(None));
    };
    // Only what was read stays counted (an undeclared size took the whole limit).
    let kept = share(bytes.len()).max(1);
    if held.num_permits() > kept {
        drop(held.split(held.num_permits() - kept));
    }

    let answer = if bytes.is_empty() {
        Answer::Empty
    } else {
        match (json_typed, serde_json::from_slice::<Value>(&bytes)) {
            (true, Ok(value)) => Answer::Json {
                object: value.is_object().then_some(value),
                // Parsed, so UTF-8.
                text: String::from_utf8(bytes).expect("JSON text is UTF-8"),
            },
            // Content that says JSON and is not is carried as the bytes it is.
            _ => {
                if share(bytes.len()) > ANSWER_LIMIT {
                    return Err(too_large(Some(bytes.len() as u64)));
                }
                let base64 = BASE64.encode(&bytes);
                Answer::Blob { uri: format!("{public_url}{uri}"), mime_type, base64 }
            }
        }
    };
    Ok(Called { answer, is_error, held })
}

/// The body's bytes, or None as soon as they pass `limit`: the rest is
/// never read, and the body (the route's stream) is dropped.
async fn read_at_most(body: HttpBody, limit: usize, declared: Option<u64>) -> ApiResult<Option<Vec<u8>>> {
    let mut bytes = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::Internal(anyhow::anyhow!("reading a tool's answer: {e}")))?;
        if bytes.len() + chunk.len() > limit {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}

/// Whether a content type is JSON: `application/json` or a `+json` type.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// The registry's routes, with the OpenAPI description of each: the two
/// of the tenant document and the standard JSON-RPC endpoint.
pub fn routes<S: Clone + Send + Sync + 'static>(registry: Registry) -> utoipa_axum::router::OpenApiRouter<S> {
    use utoipa_axum::{router::OpenApiRouter, routes};
    let rpc = OpenApiRouter::new().routes(routes!(crate::mcp_rpc::rpc)).with_state(crate::mcp_rpc::endpoint(registry.clone()));
    OpenApiRouter::new().routes(routes!(list_tools)).routes(routes!(call)).with_state(registry).merge(rpc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    /// A body that never ends, counting the chunks taken from it.
    fn endless(taken: Arc<std::sync::atomic::AtomicUsize>) -> HttpBody {
        HttpBody::from_stream(futures_util::stream::repeat_with(move || {
            taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(vec![b'x'; 1000]))
        }))
    }

    #[tokio::test]
    async fn an_answer_is_read_no_further_than_the_limit() {
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        assert_eq!(read_at_most(endless(taken.clone()), 10_500, None).await.unwrap(), None);
        assert_eq!(taken.load(std::sync::atomic::Ordering::Relaxed), 11, "ten chunks fit, the eleventh passes the limit");
        let whole = read_at_most(HttpBody::from(vec![7u8; 10_500]), 10_500, Some(10_500)).await.unwrap();
        assert_eq!(whole, Some(vec![7u8; 10_500]));
    }

    #[tokio::test]
    async fn a_held_body_returns_its_share_once_sent() {
        let budget = Arc::new(Semaphore::new(100));
        let share = budget.clone().acquire_many_owned(60).await.unwrap();
        let mut body = Holding::wrap(HttpBody::from(vec![1u8; 200 * 1024]), vec![share]);
        assert_eq!(body.size_hint().exact(), Some(200 * 1024));
        let mut sizes = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            sizes.push(frame.unwrap().into_data().unwrap().len());
            assert_eq!(budget.available_permits(), 40, "held while the answer is sent");
        }
        assert_eq!(sizes, [65536, 65536, 65536, 8192], "handed on in slices");
        assert!(body.is_end_stream());
        drop(body);
        assert_eq!(budget.available_permits(), 100);
    }

    #[test]
    fn json_content_types() {
        for json in ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/problem+json"] {
            assert!(is_json(json), "{json}");
        }
        for other in ["application/octet-stream", "text/plain", "image/png", "application/jsonl", ""] {
            assert!(!is_json(other), "{other}");
        }
    }
}
