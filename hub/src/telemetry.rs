//! Logs, and traces exported over OTLP when an endpoint is configured.
//!
//! The log goes to stdout, as text or JSON lines (`HUB_LOG_FORMAT`). With
//! `HUB_OTLP_ENDPOINT` every span (the request span with its id, method
//! and path, and the spans inside it) is also sent to an OpenTelemetry
//! collector as OTLP over HTTP (protobuf, `<endpoint>/v1/traces`), in
//! batches from a thread of the SDK's. The requests go through the hub's
//! own `reqwest` client (rustls) on the Tokio runtime: no gRPC stack and no
//! second HTTP client in the build. Off by default.

use std::{future::Future, pin::Pin};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
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
    }
    tracing_subscriber::registry().with(layers).with(filter).init();
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
