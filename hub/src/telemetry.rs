//! Logs, and traces exported over OTLP when an endpoint is configured.
//!
//! The log goes to stdout, as text or JSON lines (`HUB_LOG_FORMAT`). With
//! `HUB_OTLP_ENDPOINT` every span (the request span with its id, method
//! and path, and the spans inside it) is also sent to an OpenTelemetry
//! collector as OTLP over HTTP (protobuf, `<endpoint>/v1/traces`), in
//! batches from a thread of the SDK's. The requests go through the hub's
//! own `reqwest` client (rustls) on the Tokio runtime: no gRPC stack and no
//! second HTTP client in the build. Off by default.
//!
//! Exported, the request span is an HTTP server span after OpenTelemetry's
//! semantic conventions ([`server_span`]); it continues the trace of an
//! incoming W3C `traceparent`, and the hub's own requests to other servers
//! carry theirs (`hub_kernel::outbound::send`, through the propagator set
//! here).

use std::{future::Future, pin::Pin};

use axum::http::{Method, Version, header, uri::Authority};
use opentelemetry::{
    Context, KeyValue,
    propagation::TextMapPropagator,
    trace::{Status, TraceContextExt, TracerProvider as _},
};
use opentelemetry_http::{Bytes, HeaderExtractor, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::{Resource, propagation::TraceContextPropagator, trace::SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::{EnvFilter, Layer, layer::SubscriberExt, registry::Registry, util::SubscriberInitExt};

use hub_kernel::config::LogFormat;

/// A tracer provider exporting to the collector at `endpoint` (its base
/// URL: `http://collector:4318`). Call within the Tokio runtime, which
/// sends the batches. The service is `hub` unless `OTEL_SERVICE_NAME`
/// names it; the standard `OTEL_EXPORTER_OTLP_HEADERS` and `_TIMEOUT`
/// apply.
pub fn otlp(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let client = Client { http: reqwest::Client::new(), runtime: tokio::runtime::Handle::try_current()? };
    let exporter =
        opentelemetry_otlp::SpanExporter::builder().with_http().with_endpoint(url).with_protocol(Protocol::HttpBinary).with_http_client(client).build()?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("hub");
    }
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build())
}

/// The layer that turns tracing spans into OpenTelemetry spans.
pub fn otlp_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer("hub"))
}

/// Installs the process's subscriber: `filter`, the log in `format`, and
/// the OTLP export when `provider` is given.
/// `to_stderr`: for a subcommand whose answer is its standard output.
pub fn init(filter: EnvFilter, format: LogFormat, provider: Option<&SdkTracerProvider>, to_stderr: bool) {
    let writer = if to_stderr {
        tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr)
    } else {
        tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stdout)
    };
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = vec![match format {
        LogFormat::Json => tracing_subscriber::fmt::layer().json().with_writer(writer).boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(writer).boxed(),
    }];
    if let Some(provider) = provider {
        layers.push(otlp_layer(provider).boxed());
        // The hub's own requests carry their span's context as W3C Trace
        // Context (`hub_kernel::outbound::send` asks the global propagator).
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    }
    tracing_subscriber::registry().with(layers).with(filter).init();
}

/// A request's method as OpenTelemetry's HTTP conventions name it: one of
/// the methods of RFC 9110, PATCH and QUERY, else `None` (written
/// `_OTHER`, the method itself going in `http.request.method_original`).
pub fn known_method(method: &Method) -> Option<&'static str> {
    Some(match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ if method.as_str() == "QUERY" => "QUERY",
        _ => return None,
    })
}

/// The request span (`observe`'s, whose fields `http.request.method` and
/// `url.path` the log shows too) made an HTTP server span, when spans are
/// exported; `None` otherwise, at the cost of a failed lookup. Call before
/// the span is first entered.
///
/// Exported, the span is of kind SERVER (INTERNAL for a request the hub
/// sends itself through its router, a tool call of MCP, whose span is
/// inside the caller's), named by its method until [`ServerSpan::end`]
/// adds the route, with `url.scheme`, `server.address` and `server.port`
/// (from `Host`), `user_agent.original` and `network.protocol.version`.
/// A W3C `traceparent` (with its `tracestate`) on the request makes the
/// span a child of the caller's: the trace goes on.
pub fn server_span(span: &tracing::Span, req: &axum::extract::Request) -> Option<ServerSpan> {
    let (headers, method) = (req.headers(), req.method());
    let verb = known_method(method);
    if verb.is_none() {
        span.record("http.request.method_original", method.as_str());
    }
    let (parent, nested) = if headers.contains_key("traceparent") {
        (TraceContextPropagator::new().extract_with_context(&Context::new(), &HeaderExtractor(headers)), false)
    } else {
        // The default parent: a span of the hub's when it sent the request.
        let current = Context::current();
        let nested = current.has_active_span();
        (current, nested)
    };
    span.set_parent(parent).ok()?;
    span.record("otel.kind", if nested { "internal" } else { "server" });
    let verb = verb.unwrap_or("HTTP");
    span.record("otel.name", verb);
    span.set_attribute("url.scheme", req.uri().scheme_str().unwrap_or("http").to_owned());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<Authority>().ok());
    if let Some(host) = host.as_ref().or(req.uri().authority()) {
        span.set_attribute("server.address", host.host().trim_start_matches('[').trim_end_matches(']').to_owned());
        if let Some(port) = host.port_u16() {
            span.set_attribute("server.port", i64::from(port));
        }
    }
    if let Some(agent) = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()) {
        span.set_attribute("user_agent.original", agent.to_owned());
    }
    let protocol = match req.version() {
        Version::HTTP_09 => "0.9",
        Version::HTTP_10 => "1.0",
        Version::HTTP_11 => "1.1",
        Version::HTTP_2 => "2",
        Version::HTTP_3 => "3",
        _ => "",
    };
    if !protocol.is_empty() {
        span.set_attribute("network.protocol.version", protocol);
    }
    Some(ServerSpan { span: span.clone(), verb })
}

/// An exported request span, waiting for its answer.
pub struct ServerSpan {
    span: tracing::Span,
    verb: &'static str,
}

impl ServerSpan {
    /// The answer: the span named `{method} {route}` when a route matched
    /// (`route`, the template, also `http.route`), the status code, and for
    /// a 5xx `error.type` (the code) and an error status.
    pub fn end(self, route: Option<&str>, status: u16) {
        let context = self.span.context();
        let span = context.span();
        if let Some(route) = route {
            span.update_name(format!("{} {route}", self.verb));
            span.set_attribute(KeyValue::new("http.route", route.to_owned()));
        }
        span.set_attribute(KeyValue::new("http.response.status_code", i64::from(status)));
        if status >= 500 {
            span.set_attribute(KeyValue::new("error.type", status.to_string()));
            span.set_status(Status::error(""));
        }
    }
}

/// The exporter's HTTP client: the hub's `reqwest`, each request run on the
/// Tokio runtime (the SDK exports from a thread of its own).
#[derive(Debug)]
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl opentelemetry_http::HttpClient for Client {
    fn send_bytes<'s, 'f>(&'s self, request: Request<Bytes>) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'f>>
    where
        's: 'f,
        Self: 'f,
    {
        let http = self.http.clone();
        let runtime = self.runtime.clone();
        Box::pin(async move {
            let request = reqwest::Request::try_from(request)?;
            let sent = runtime.spawn(async move {
                let res = http.execute(request).await?;
                let mut answer = Response::builder().status(res.status());
                if let Some(headers) = answer.headers_mut() {
                    *headers = res.headers().clone();
                }
                let body = res.bytes().await?;
                Ok::<_, HttpError>(answer.body(body)?)
            });
            sent.await?
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::{Router, body::Bytes, http::HeaderMap, routing::post};
    use tokio::sync::mpsc;

    use super::*;

    /// A stand-in collector receives the request span, with its id, as
    /// OTLP protobuf at `/v1/traces`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn spans_are_exported_to_the_configured_collector() {
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, Bytes)>();
        let collector = Router::new().route(
            "/v1/traces",
            post(move |headers: HeaderMap, body: Bytes| {
                let tx = tx.clone();
                async move {
                    let kind = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                    let _ = tx.send((kind, body));
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, collector).await });

        let provider = otlp(&format!("http://{addr}/")).unwrap();
        let subscriber = tracing_subscriber::registry().with(otlp_layer(&provider));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", id = "otlp-req-7f3a", method = "GET", path = "/api/me");
            span.in_scope(|| tracing::info!("inside"));
        });
        let flusher = provider.clone();
        tokio::task::spawn_blocking(move || flusher.force_flush()).await.unwrap().unwrap();
        let (kind, body) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("an export").unwrap();
        assert_eq!(kind, "application/x-protobuf");
        let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
        for needle in [&b"otlp-req-7f3a"[..], b"request", b"/api/me", b"hub"] {
            assert!(has(needle), "{} missing from the export", String::from_utf8_lossy(needle));
        }
        tokio::task::spawn_blocking(move || provider.shutdown()).await.unwrap().unwrap();
    }
}
