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

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::{Router, body::Body, extract::Request, response::Response};
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

use hub_kernel::config::Config;

/// The limits of the HTTP server, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Limits {
    pub fn from_config(config: &Config) -> Limits {
        Limits {
            header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
            idle_timeout: Duration::from_secs(config.idle_timeout_seconds),
            max_connections: usize::try_from(config.max_connections).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS),
        }
    }
}

/// Serves `router` on `listener` until `stop` turns true, then stops
/// accepting and waits for the open connections to finish their requests.
pub async fn run(listener: TcpListener, router: Router, limits: Limits, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
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
        let service = Tracked { inner: service, activity };
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

/// The router as a hyper service that keeps the connection's activity.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
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
        Box::pin(async move {
            let res = inner.oneshot(req.map(Body::new)).await?;
            Ok(res.map(|body| Body::new(Guarded { body, _busy: busy })))
        })
    }
}

/// A response body that keeps its request in flight until it is dropped.
struct Guarded {
    body: Body,
    _busy: Busy,
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

    const LIMITS: Limits = Limits { header_read_timeout: Duration::from_secs(5), idle_timeout: Duration::from_secs(5), max_connections: 8 };

    #[tokio::test]
    async fn handlers_see_the_peer_address() {
        let router = Router::new().route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }));
        let (addr, stop, task) = spawn(router, LIMITS).await;
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
        let (addr, stop, task) = spawn(router, LIMITS).await;
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
