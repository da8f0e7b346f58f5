//! The hub: one HTTP gateway serving the tenant API catalogue and the
//! operator routes, over SQLite (embedded default) or PostgreSQL. This
//! crate assembles the kernel and the areas: the router, the directories
//! the gate consults, the background tasks and the server; it defines no
//! route of its own besides `/health`.
//!
//! `app` builds the router for a state; `serve` runs it until SIGTERM or
//! SIGINT, draining in-flight requests.

pub mod catalogue;
pub mod mcp;
pub mod mcp_rpc;
pub mod observe;
pub mod server;
pub mod telemetry;

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use anyhow::Context;
use axum::{Router, middleware, response::IntoResponse};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tower_http::catch_panic::CatchPanicLayer;

use hub_kernel::{
    audit, bus,
    config::{Config, GateMode},
    crypto::MasterKey,
    db::{self, Backend, Db},
    error::{self, ApiError},
    gate::{self, directory::Directories},
    mail,
    state::{AppState, INVALIDATION_CHANNEL},
};
use hub_platform::quic;
use utoipa_axum::router::OpenApiRouter;

/// The catalogue's routes, with the OpenAPI document they describe (the
/// MCP registry's own routes apart: see `app`).
pub fn catalogue(published: catalogue::Published) -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::new()
        .merge(catalogue::area("hub", catalogue::routes(published)))
        .merge(catalogue::area("hub", observe::routes()))
        .merge(catalogue::area("identity", hub_identity::routes()))
        .merge(catalogue::area("platform", hub_platform::routes()))
        .merge(catalogue::area("device", hub_device::routes()))
        .merge(catalogue::area("governance", hub_governance::routes()))
        .merge(catalogue::area("provenance", hub_provenance::routes()))
        .merge(catalogue::area("outreach", hub_outreach::routes()))
        .merge(catalogue::area("crm", hub_crm::routes()))
        .merge(catalogue::area("connectors", hub_outreach::connectors::routes()))
        .merge(catalogue::area("ai", hub_ai::routes()))
        .merge(catalogue::area("billing", hub_billing::routes()))
        .merge(catalogue::area("operator", hub_operator::routes()))
        .split_for_parts()
}

/// The whole HTTP surface for a state.
pub fn app(state: AppState) -> Router {
    assemble(state).0
}

/// The surface, and in a debug build the check of its answers' statuses
/// against its document.
fn assemble(state: AppState) -> (Router, Option<Arc<observe::Statuses>>) {
    if state.config.metrics {
        observe::recorder();
    }
    let (registry, published) = (mcp::Registry::default(), catalogue::Published::default());
    let (api, mut openapi) = catalogue(published.clone());
    let (mcp_api, mcp_openapi) = catalogue::area("platform", mcp::routes(registry.clone())).split_for_parts();
    openapi.merge(mcp_openapi);
    let doc = catalogue::document(openapi);
    published.set(&doc);
    let observing = observe::Observing { metrics: state.config.metrics, statuses: cfg!(debug_assertions).then(|| Arc::new(observe::Statuses::of(&doc))) };
    // A tool call goes through the same routes, gate included, less the
    // registry's own: the registry holds that router, so it must not hold
    // the registry (a cycle would keep every hub's pools alive).
    registry.set(mcp::tools(&doc), surface(api.clone(), state.clone(), observing.clone()), &state.config.public_url);
    let statuses = observing.statuses.clone();
    // The console's static files, beside the API and outside the gate (a
    // browser loads them before anyone signs in); once loaded, the pages
    // call the API like any client.
    let app = console::router().fallback_service(surface(api.merge(mcp_api), state, observing));
    (app, statuses)
}

/// Routes under the gate: authentication of every request, the per-route
/// authority check, the body limit, the envelope over framework errors and
/// the panic catcher.
///
/// Only the authority check is a route layer: it needs the matched route
/// template. The others wrap the router whole, before routing, so each
/// request passes through each of them once. Added with `Router::layer`
/// they would wrap every route's service one by one, and a request would
/// clone that nested stack of boxed services for each layer.
fn surface(api: Router<AppState>, state: AppState, observing: observe::Observing) -> Router {
    // The authority check also hands the template to the metrics, on the answer.
    let api = api.route_layer(middleware::from_fn_with_state(state.clone(), gate::authorize));
    let routed = Router::new().merge(api).fallback(|| async { ApiError::NotFound }).with_state(state.clone());
    let stack = tower::ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(observing, observe::observe))
        .layer(panic_catcher())
        .layer(middleware::map_response(error::envelope_framework_errors))
        .layer(middleware::from_fn_with_state(state, gate::authenticate))
        .layer(axum::extract::DefaultBodyLimit::max(error::BODY_LIMIT))
        .service(routed);
    Router::new().fallback_service(stack)
}

/// Answers a panic in a handler (or in the gate) with the opaque 500
/// envelope, its message in the server log only. Without this the panic
/// unwinds through the connection's task and the client sees the
/// connection drop with no answer at all.
pub fn panic_catcher() -> CatchPanicLayer<fn(Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response> {
    CatchPanicLayer::custom(panic_answer)
}

fn panic_answer(panic: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    let what = match panic.downcast_ref::<&str>() {
        Some(s) => s.to_string(),
        None => panic.downcast_ref::<String>().cloned().unwrap_or_else(|| "no message".into()),
    };
    ApiError::Internal(anyhow::anyhow!("a handler panicked: {what}")).into_response()
}

/// Opens the database, applies migrations and builds the state.
pub async fn prepare(config: Config) -> anyhow::Result<AppState> {
    // Both modes let requests without a valid credential through: a
    // setting left over from a trial must not open production.
    match config.gate_mode {
        GateMode::Off if !config.dev => anyhow::bail!("AUTH_GATE_MODE=off is refused outside development mode (HUB_DEV)"),
        GateMode::Report if !config.dev => anyhow::bail!("AUTH_GATE_MODE=report is refused outside development mode (HUB_DEV)"),
        _ => {}
    }
    std::fs::create_dir_all(&config.data_dir).with_context(|| format!("creating {}", config.data_dir.display()))?;
    if config.dev {
        tracing::warn!("development mode: not for production");
    }
    let master = MasterKey::load(config.master_key.as_deref(), &config.data_dir, config.dev)?;
    let db = Db::connect(&config.database_url()).await?;
    db.migrate().await?;
    let mail = mail::from_config(&config)?;
    let state = AppState::new(config, db, master, mail, directories()).await?;
    hub_outreach::register_inbound(&state.inbound);
    spawn_background(&state);
    Ok(state)
}

/// The areas' answers to the gate's lookups.
pub fn directories() -> Directories {
    Directories {
        keys: Arc::new(hub_identity::Directory),
        relations: Arc::new(hub_governance::rebac::Relations),
        policies: Arc::new(hub_governance::policy::Policies),
    }
}

/// Housekeeping and, on PostgreSQL, the cache invalidation listener.
fn spawn_background(state: &AppState) {
    if state.config.metrics {
        observe::spawn_upkeep();
        observe::spawn_pool_probe(state);
    }
    bus::spawn_background(state);
    hub_platform::spawn_background(state);
    hub_identity::spawn_background(state);
    hub_crm::spawn_background(state);
    hub_ai::spawn_background(state);
    let s = state.clone();
    db::every(Duration::from_secs(60), move || {
        let s = s.clone();
        async move {
            if let Err(e) = gate::keys::sweep_rate_windows(&s).await {
                tracing::warn!(error = %e, "sweeping rate windows");
            }
            if let Err(e) = gate::throttle::sweep(&s).await {
                tracing::warn!(error = %e, "sweeping login throttles");
            }
        }
    });
    // Rate-limit leases a replica no longer draws on go back to the
    // shared counters (see `gate::rate`).
    let s = state.clone();
    db::every(Duration::from_millis(500), move || {
        let s = s.clone();
        async move {
            if let Err(e) = gate::rate::return_idle(&s).await {
                tracing::warn!(error = %e, "returning idle rate leases");
            }
        }
    });
    // Retention: shred expired audit payloads and forget expired inbound
    // webhook ids, at start and then hourly.
    let s = state.clone();
    db::every(Duration::from_secs(3600), move || {
        let s = s.clone();
        async move {
            match audit::retention::sweep(&s.db, chrono::Utc::now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(shredded = n, "audit retention sweep"),
                Err(e) => tracing::warn!(error = %e, "audit retention sweep"),
            }
            match hub_platform::webhook::inbound::forget_expired(&s.db, chrono::Utc::now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(forgotten = n, "inbound webhook ids expired"),
                Err(e) => tracing::warn!(error = %e, "inbound webhook ids expired"),
            }
        }
    });
    // Other replicas' cache invalidations; after a gap every cache is
    // dropped, since notifications may have been missed meanwhile.
    if state.db.backend == Backend::Postgres {
        let s = state.clone();
        tokio::spawn(async move {
            let applied = s.clone();
            db::follow(
                s.db.url.clone(),
                INVALIDATION_CHANNEL,
                move |payload| {
                    let applied = applied.clone();
                    async move { applied.apply_remote(&payload).await }
                },
                || s.clear_all(),
            )
            .await
        });
    }
}

/// A running server: its address and a handle to stop it.
pub struct Server {
    pub addr: std::net::SocketAddr,
    /// The QUIC command endpoint, when one is configured.
    pub quic_addr: Option<std::net::SocketAddr>,
    quic: Option<quic::QuicServer>,
    pub state: AppState,
    statuses: Option<Arc<observe::Statuses>>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// The answers this hub gave whose (route, status) its document does
    /// not list (checked in debug builds only; see `observe::Statuses`).
    pub fn undocumented_statuses(&self) -> Vec<String> {
        self.statuses.as_ref().map(|s| s.undocumented()).unwrap_or_default()
    }

    /// Stops accepting, drains in-flight requests and waits for the end.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        self.state.streams.close();
        if let Some(q) = self.quic {
            q.stop().await;
        }
        self.task.await??;
        Ok(())
    }
}

/// Binds and serves in the background (tests and embedding).
pub async fn start(state: AppState) -> anyhow::Result<Server> {
    let listener = TcpListener::bind(state.config.listen).await.with_context(|| format!("binding {}", state.config.listen))?;
    let addr = listener.local_addr()?;
    let quic = quic::start(&state).await?;
    let quic_addr = quic.as_ref().map(|q| q.addr);
    let (tx, rx) = tokio::sync::watch::channel(false);
    let (router, statuses) = assemble(state.clone());
    let limits = server::Limits::from_config(&state.config);
    let task = tokio::spawn(server::run(listener, router, limits, rx));
    Ok(Server { addr, quic_addr, quic, state, statuses, shutdown: tx, task })
}

/// A hub listening before it is prepared: while its migrations run it
/// answers `/health` (alive), and 503 to `/ready` and every other path,
/// so a load balancer sends it nothing yet and an orchestrator does not
/// take a long migration for a hung process. `serve` then switches every
/// connection, open ones included, to the whole router.
pub struct Booting {
    pub addr: std::net::SocketAddr,
    app: Arc<OnceLock<Router>>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Booting {
    /// Starts answering on `listener` as a starting hub.
    pub fn start(listener: TcpListener, limits: server::Limits) -> anyhow::Result<Booting> {
        let addr = listener.local_addr()?;
        let app = Arc::new(OnceLock::<Router>::new());
        let slot = app.clone();
        let router = Router::new().fallback_service(tower::service_fn(move |req: axum::extract::Request| {
            let app = slot.get().cloned();
            async move {
                Ok::<_, std::convert::Infallible>(match app {
                    Some(app) => app.oneshot(req).await.unwrap_or_else(|e| match e {}),
                    None => observe::starting(req.uri().path()),
                })
            }
        }));
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(server::run(listener, router, limits, rx));
        Ok(Booting { addr, app, shutdown, task })
    }

    /// Serves the prepared state from now on (and starts its QUIC endpoint).
    pub async fn serve(self, state: AppState) -> anyhow::Result<Server> {
        let quic = quic::start(&state).await?;
        let quic_addr = quic.as_ref().map(|q| q.addr);
        let (router, statuses) = assemble(state.clone());
        if self.app.set(router).is_err() {
            anyhow::bail!("a booting hub is served once");
        }
        Ok(Server { addr: self.addr, quic_addr, quic, state, statuses, shutdown: self.shutdown, task: self.task })
    }

    /// Stops a hub that never got ready.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        self.task.await??;
        Ok(())
    }
}

/// Serves until SIGTERM or SIGINT, then drains in-flight requests. Listens
/// from the start: see `Booting`.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let listener = TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    let booting = Booting::start(listener, server::Limits::from_config(&config))?;
    tracing::info!(addr = %booting.addr, "hub starting: /health answers, /ready once the migrations are applied");
    let state = match prepare(config).await {
        Ok(state) => state,
        Err(e) => {
            let _ = booting.stop().await;
            return Err(e);
        }
    };
    let server = booting.serve(state).await?;
    tracing::info!(addr = %server.addr, quic = ?server.quic_addr, "hub listening: ready");
    shutdown_signal().await;
    tracing::info!("shutting down: draining in-flight requests");
    server.stop().await?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::{Router, routing::get};
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::{TcpListener, TcpStream},
    };

    use serde_json::json;

    use super::*;

    async fn boom() -> &'static str {
        panic!("a bug in a handler")
    }

    /// Reads one HTTP/1.1 response with a Content-Length: (status, body).
    async fn response(tcp: &mut TcpStream) -> (u16, String) {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await.expect("an answer").unwrap();
            assert!(n > 0, "the connection was dropped: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).into_owned();
            let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
            let length: usize =
                head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).expect("content-length");
            if body.len() >= length {
                return (head[9..12].parse().unwrap(), body.to_string());
            }
        }
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_in_the_envelope_and_the_connection_serves_on() {
        let router = Router::new().route("/boom", get(boom)).route("/fine", get(|| async { "fine" })).layer(panic_catcher());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let limits = server::Limits::for_tests(4);
        let task = tokio::spawn(server::run(listener, router, limits, stopping));
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let (status, body) = response(&mut tcp).await;
        assert_eq!(status, 500);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap(), json!({ "success": false, "error": "InternalError" }));
        // The same connection answers the next request.
        tcp.write_all(b"GET /fine HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        assert_eq!(response(&mut tcp).await, (200, "fine".to_string()));
        stop.send_replace(true);
        drop(tcp);
        task.await.unwrap().unwrap();
    }
}
