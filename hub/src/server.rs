//! The HTTP server: an accept loop on hyper-util that serves the router with
//! a header-read timeout, an idle timeout, a cap on open connections, the
//! peer address as `ConnectInfo<SocketAddr>`, and a graceful drain at stop.
//!
//! `axum::serve` has none of these limits, so a client that trickles a
//! request head byte by byte (slowloris), or opens connections and never
//! uses them, could hold sockets and memory for as long as it liked.
//!
//! - **Header read timeout** (HTTP/1.1): hyper closes a connection whose
//!   request head is not complete in time. hyper starts that clock as soon
//!   as the connection is ready for a request, so it also bounds how long a
//!   keep-alive connection may wait for its next request.
//! - **Idle timeout**: a connection with no request in flight (no handler
//!   running and no response body being sent) is closed after it. Until its
//!   first request has arrived, a connection gets only the header read
//!   timeout; this also covers HTTP/2, whose preface and request headers
//!   hyper reads with no clock of its own.
//! - **Connection cap**: at the cap the hub stops accepting; new
//!   connections wait in the kernel's listen backlog and are served as soon
//!   as a slot frees (the two timeouts guarantee slots do free), rather
//!   than being accepted and dropped.
//! - **Body read timeout**: a request's body must arrive in full within it,
//!   counted from the head; a body still incomplete then is answered 408
//!   and the connection closed. The idle timeout cannot see this case: a
//!   handler waiting for a body is a request in flight. (A streamed body
//!   longer than the API's body limit, media content, must bring its first
//!   `BODY_LIMIT` bytes within it, then each next bytes within it.)
//! - **Body memory**: the request bodies being received share one bound
//!   across the process. A body that would take more is answered 503 with
//!   `Retry-After` and its connection closed. Bodies past their first
//!   [`SMALL_BODY`] bytes may hold only three quarters of the bound, so
//!   many slow large bodies cannot keep out an ordinary small request.
//! - **HTTP/2 streams**: at most `HUB_HTTP2_MAX_STREAMS` at once on one
//!   connection, and small flow-control windows, so the data a client may
//!   send ahead of the handlers is small too.

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::Request,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{
    net::TcpListener,
    sync::{Semaphore, watch},
    time::Instant,
};
use tower::ServiceExt;

use hub_kernel::{
    config::Config,
    error::{ApiError, BODY_LIMIT},
};

/// The limits of the HTTP server, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub body_read_timeout: Duration,
    /// Bytes the request bodies being received may hold, all together.
    pub body_memory: usize,
    pub http2_max_streams: u32,
}

impl Limits {
    pub fn from_config(config: &Config) -> Limits {
        Limits {
            header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
            idle_timeout: Duration::from_secs(config.idle_timeout_seconds),
            max_connections: usize::try_from(config.max_connections).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS),
            body_read_timeout: Duration::from_millis(config.body_read_timeout_ms),
            body_memory: usize::try_from(config.body_memory_mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX),
            http2_max_streams: config.http2_max_streams,
        }
    }

    /// Short limits for tests of the server itself.
    pub fn for_tests(max_connections: usize) -> Limits {
        Limits {
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            max_connections,
            body_read_timeout: Duration::from_secs(5),
            body_memory: 64 * 1024 * 1024,
            http2_max_streams: 64,
        }
    }
}

/// The HTTP/2 flow-control windows: what a client may send ahead of the
/// handlers reading it, per stream and per connection.
const H2_STREAM_WINDOW: u32 = 256 * 1024;
const H2_CONNECTION_WINDOW: u32 = 1024 * 1024;

/// Serves `router` on `listener` until `stop` turns true, then stops
/// accepting and waits for the open connections to finish their requests.
pub async fn run(listener: TcpListener, router: Router, limits: Limits, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_streams)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW);
    let bodies = Arc::new(BodyBudget { limit: limits.body_memory, used: AtomicUsize::new(0) });
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let make_service = router.into_make_service_with_connect_info::<SocketAddr>();
    loop {
        // A free slot first: at the cap nothing is accepted, so the waiting
        // connections stay in the backlog instead of being reset.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            _ = stopped(&mut stop) => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                accept_error(e).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let service = make_service.clone().oneshot(peer).await.unwrap_or_else(|e| match e {});
        let activity = Arc::new(Activity::new());
        let watched = activity.clone();
        let service = Tracked { inner: service, activity, bodies: bodies.clone(), body_read_timeout: limits.body_read_timeout };
        let conn = graceful.watch(builder.serve_connection_with_upgrades(TokioIo::new(tcp), service).into_owned());
        tokio::spawn(async move {
            let _slot = slot;
            tokio::select! {
                served = conn => if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                },
                _ = idle_expired(watched, limits) => {
                    // Nothing is in flight: dropping the connection closes it.
                    tracing::debug!(%peer, "closing an idle connection");
                }
            }
        });
    }
    // Closing the listener refuses new connections while the open ones drain.
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Resolves once the server is asked to stop (or its handle is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// An accept error: a connection that died in the backlog is nothing; any
/// other (out of file descriptors, say) is logged and retried after a pause
/// so the loop does not spin while nothing can be accepted.
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// What a connection is doing, for its idle timer. The request path only
/// updates these counters (a few atomic operations, no wake-up); the idle
/// timer reads them when its deadline comes.
struct Activity {
    opened: Instant,
    /// Requests whose handler runs or whose response body is being sent.
    in_flight: AtomicUsize,
    /// Requests seen so far.
    requests: AtomicU64,
    /// Milliseconds after `opened` when `in_flight` last dropped to zero.
    idle_since_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity { opened: Instant::now(), in_flight: AtomicUsize::new(0), requests: AtomicU64::new(0), idle_since_ms: AtomicU64::new(0) }
    }
}

/// Resolves when the connection has been idle too long: with no request in
/// flight for the idle timeout, or for the header read timeout before its
/// first request.
async fn idle_expired(activity: Arc<Activity>, limits: Limits) {
    // Requests come and go without waking this task, so it never sleeps
    // longer than the shorter limit: a deadline may have moved meanwhile.
    let period = limits.header_read_timeout.min(limits.idle_timeout);
    loop {
        let limit = if activity.requests.load(Ordering::Acquire) == 0 { limits.header_read_timeout } else { limits.idle_timeout };
        if activity.in_flight.load(Ordering::Acquire) > 0 {
            tokio::time::sleep(period).await;
            continue;
        }
        let idle_since = activity.idle_since_ms.load(Ordering::Acquire);
        let deadline = activity.opened + Duration::from_millis(idle_since) + limit;
        let now = Instant::now();
        if now < deadline {
            tokio::time::sleep_until(deadline.min(now + period)).await;
            continue;
        }
        // Still idle, and not briefly busy in between?
        if activity.in_flight.load(Ordering::Acquire) == 0 && activity.idle_since_ms.load(Ordering::Acquire) == idle_since {
            return;
        }
    }
}

/// Marks a request in flight until dropped: with the handler's future if
/// it is cancelled, otherwise with the response body once it is sent.
struct Busy(Arc<Activity>);

impl Busy {
    fn start(activity: &Arc<Activity>) -> Busy {
        activity.requests.fetch_add(1, Ordering::AcqRel);
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let a = &self.0;
        // The idle time is stamped before the count drops, so the timer
        // never sees zero in flight with an old stamp.
        a.idle_since_ms.store(a.opened.elapsed().as_millis() as u64, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The router as a hyper service that keeps the connection's activity and
/// meters the request bodies it receives.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
    bodies: Arc<BodyBudget>,
    body_read_timeout: Duration,
}

impl<S> hyper::service::Service<hyper::Request<Incoming>> for Tracked<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let busy = Busy::start(&self.activity);
        let inner = self.inner.clone();
        // A request without a body (most reads) costs nothing more.
        let charge = (!req.body().is_end_stream()).then(|| Arc::new(Charge::new(self.bodies.clone(), self.body_read_timeout)));
        let req = match &charge {
            None => req.map(Body::new),
            Some(charge) => {
                let deadline = Box::pin(tokio::time::sleep(self.body_read_timeout));
                req.map(|body| Body::new(Metered { body, deadline, charge: charge.clone(), read: 0, ended: false }))
            }
        };
        Box::pin(async move {
            let mut res = inner.oneshot(req).await?;
            // The handler's answer to a body that failed under it (a 400 or
            // 413 of its extractor) gives way to the reason, and the rest
            // of that body is not read: the connection closes.
            if let Some(error) = charge.as_ref().and_then(|c| c.failure()) {
                res = error.into_response();
                res.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(res.map(|body| Body::new(Guarded { body, _busy: busy, _charge: charge })))
        })
    }
}

/// A response body that keeps its request in flight until it is dropped,
/// and the request body's share of the budget with it (the handler may
/// hold the bytes it read until its answer is sent).
struct Guarded {
    body: Body,
    _busy: Busy,
    _charge: Option<Arc<Charge>>,
}

/// The bytes held by the request bodies being received, and their bound.
#[derive(Debug)]
struct BodyBudget {
    limit: usize,
    used: AtomicUsize,
}

/// The first bytes of each body, which may use the whole budget; beyond
/// them a body may use only three quarters of it.
pub const SMALL_BODY: usize = 64 * 1024;

/// Why a request's body failed while the handler read it.
const FAILED_TIMEOUT: u8 = 1;
const FAILED_MEMORY: u8 = 2;

/// One request body's share of the budget, returned when the request is
/// done (its metered body and its answer both dropped), and how the body
/// failed, if it did.
struct Charge {
    budget: Arc<BodyBudget>,
    held: AtomicUsize,
    failed: AtomicU8,
    /// The body read timeout, for the answer when it runs out.
    timeout: Duration,
}

impl Charge {
    fn new(budget: Arc<BodyBudget>, timeout: Duration) -> Charge {
        Charge { budget, held: AtomicUsize::new(0), failed: AtomicU8::new(0), timeout }
    }

    /// Takes `n` more bytes from the budget, or refuses without taking any.
    fn take(&self, n: usize) -> bool {
        let held = self.held.load(Ordering::Relaxed);
        let limit = self.budget.limit;
        let cap = if held.saturating_add(n) > SMALL_BODY { limit - limit / 4 } else { limit };
        let taken = self.budget.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| used.checked_add(n).filter(|u| *u <= cap)).is_ok();
        if taken {
            self.held.fetch_add(n, Ordering::Relaxed);
        }
        taken
    }

    fn fail(&self, why: u8) {
        self.failed.store(why, Ordering::Release);
    }

    fn failure(&self) -> Option<ApiError> {
        match self.failed.load(Ordering::Acquire) {
            FAILED_TIMEOUT => Some(ApiError::BodyTimeout(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX))),
            FAILED_MEMORY => Some(ApiError::BodyMemory(1)),
            _ => None,
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(*self.held.get_mut(), Ordering::AcqRel);
    }
}

/// A request body read against the body read timeout and the budget.
///
/// Only the first [`BODY_LIMIT`] bytes are charged and must arrive within
/// the timeout: no handler buffers more (the extractors stop there), so
/// what follows can only be read by a handler that streams it on (media
/// content, up to its own limit), which holds little at a time. Past that
/// point the timeout bounds each wait for the next bytes instead.
struct Metered {
    body: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    charge: Arc<Charge>,
    /// Bytes read so far.
    read: usize,
    ended: bool,
}

impl Metered {
    fn failed(&mut self, why: u8, what: &'static str) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        self.ended = true;
        self.charge.fail(why);
        Poll::Ready(Some(Err(axum::Error::new(what))))
    }
}

impl http_body::Body for Metered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, Bytes::len);
                let charged = n.min(BODY_LIMIT.saturating_sub(self.read));
                if charged > 0 && !self.charge.take(charged) {
                    return self.failed(FAILED_MEMORY, "the request bodies being received hold the memory allowed them");
                }
                self.read = self.read.saturating_add(n);
                if self.read > BODY_LIMIT {
                    let next = tokio::time::Instant::now() + self.charge.timeout;
                    self.deadline.as_mut().reset(next);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(axum::Error::new(e)))),
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => self.failed(FAILED_TIMEOUT, "the request body did not arrive within the body read timeout"),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl http_body::Body for Guarded {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::{Router, extract::ConnectInfo, routing::get};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn spawn(router: Router, limits: Limits) -> (SocketAddr, watch::Sender<bool>, tokio::task::JoinHandle<std::io::Result<()>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(run(listener, router, limits, rx));
        (addr, tx, task)
    }

    fn limits() -> Limits {
        Limits::for_tests(8)
    }

    #[tokio::test]
    async fn handlers_see_the_peer_address() {
        let router = Router::new().route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }));
        let (addr, stop, task) = spawn(router, limits()).await;
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let local = tcp.local_addr().unwrap();
        tcp.write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with(&local.to_string()), "the handler saw another peer than {local}: {answer}");
        stop.send_replace(true);
        task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn stopping_waits_for_the_request_in_flight() {
        let router = Router::new().route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "done"
            }),
        );
        let (addr, stop, task) = spawn(router, limits()).await;
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send_replace(true);
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("done"), "{answer}");
        task.await.unwrap().unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the listener is closed after the drain");
    }
}
