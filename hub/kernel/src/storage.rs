//! The object store behind sdk-media, from `HUB_MEDIA_STORE`: the local
//! filesystem under the data dir by default, or an S3-compatible bucket.
//! Several hub replicas need a store they all reach (S3): a local
//! directory is one machine's.
//!
//! The store is `Guarded`: when it cannot serve (unreachable, timing
//! out, failing, its bucket missing, the hub's credentials refused), the
//! routes that need it answer 503 with `Retry-After` ([`failure`]), the
//! cause is logged once, when the store becomes unavailable, and for
//! [`RETRY_AFTER`] after each such failure calls fail at once instead of
//! waiting on the network again. The S3 client retries a few times,
//! quickly ([`s3_retries`]): its default (ten retries, backing off up to
//! 15 s apart) held a request about 2 to 4 s before its 500 when the store
//! refused connections.

use std::{
    fmt,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use futures_util::{StreamExt, stream::BoxStream};
use object_store::{
    BackoffConfig, ClientConfigKey, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RetryConfig, UploadPart,
    aws::{AmazonS3Builder, AmazonS3ConfigKey},
    local::LocalFileSystem,
    path::Path,
    prefix::PrefixStore,
};

use crate::{config::Config, error::ApiError};

/// How long the routes tell a client to wait (`Retry-After`, seconds) when
/// the store is unavailable, and how long calls fail at once after the
/// store was found unavailable before one tries it again.
pub const RETRY_AFTER: u64 = 5;

/// The connection timeout of the S3 client unless `AWS_CONNECT_TIMEOUT`
/// sets one (object_store's default: 5 s).
const S3_CONNECT_TIMEOUT: &str = "2s";

pub fn open(config: &Config) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let setting = config.media_store.trim();
    if setting == "file" || setting.is_empty() {
        return local(&config.data_dir.join("media"));
    }
    if let Some(path) = setting.strip_prefix("file://") {
        return local(std::path::Path::new(path));
    }
    if let Some(rest) = setting.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            bail!("HUB_MEDIA_STORE: s3://bucket[/prefix] names no bucket");
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(s3_retries());
        if std::env::var_os("AWS_CONNECT_TIMEOUT").is_none() {
            builder = builder.with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), S3_CONNECT_TIMEOUT);
        }
        let s3 = builder.build().context("HUB_MEDIA_STORE: the S3 store")?;
        let prefix = prefix.trim_matches('/');
        return Ok(if prefix.is_empty() { guard(s3) } else { guard(PrefixStore::new(s3, prefix)) });
    }
    bail!("HUB_MEDIA_STORE must be file, file:///absolute/path or s3://bucket[/prefix]")
}

fn local(dir: &std::path::Path) -> anyhow::Result<Arc<dyn ObjectStore>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating the media directory {}", dir.display()))?;
    Ok(guard(LocalFileSystem::new_with_prefix(dir).context("HUB_MEDIA_STORE: the media directory")?))
}

/// The S3 client's retries of a failed request: three, 50 ms to 0.5 s
/// apart, none begun after 3 s. A store that refuses connections fails a
/// request within about half a second.
pub fn s3_retries() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig { init_backoff: Duration::from_millis(50), max_backoff: Duration::from_millis(500), base: 2.0 },
        max_retries: 3,
        retry_timeout: Duration::from_secs(3),
    }
}

/// `store`, guarded (see the module's notes).
pub fn guard(store: impl ObjectStore) -> Arc<dyn ObjectStore> {
    guarded(store, Duration::from_secs(RETRY_AFTER))
}

/// `store`, guarded, resting `rest` after each failure meaning it cannot
/// serve.
fn guarded(store: impl ObjectStore, rest: Duration) -> Arc<dyn ObjectStore> {
    Arc::new(Guarded { inner: Box::new(store), health: Arc::new(Health { down: Mutex::default(), rest }) })
}

/// The answer of a route whose call to the store failed: 503 with
/// `Retry-After` when the store cannot serve (logged where it was found
/// unavailable), otherwise an internal error naming `what` in the log.
pub fn failure(e: object_store::Error, what: &'static str) -> ApiError {
    if unavailable(&e) { ApiError::StoreUnavailable(RETRY_AFTER) } else { ApiError::Internal(anyhow::Error::new(e).context(what)) }
}

/// Whether an error means the store cannot serve now, rather than
/// something about one object or a fault of the hub: it could not be
/// reached, timed out or kept failing (object_store reports these as
/// generic errors, after its retries), it refused the hub's credentials,
/// or its bucket does not exist.
pub fn unavailable(e: &object_store::Error) -> bool {
    use object_store::Error::*;
    match e {
        Generic { .. } | PermissionDenied { .. } | Unauthenticated { .. } => true,
        NotFound { source, .. } => source.to_string().contains("<Code>NoSuchBucket</Code>"),
        _ => false,
    }
}

/// The failure of a call made while the store is known unavailable.
#[derive(Debug, thiserror::Error)]
#[error("the object store was found unavailable {0:?} ago; not called again yet")]
struct Resting(Duration);

/// Whether the store serves, as its last calls found.
#[derive(Debug)]
struct Health {
    down: Mutex<Option<Down>>,
    /// How long calls fail at once after a failure meaning the store
    /// cannot serve.
    rest: Duration,
}

/// The store found unavailable.
#[derive(Debug)]
struct Down {
    since: Instant,
    /// Calls fail at once until then.
    until: Instant,
}

impl Health {
    /// Refuses a call at once while the store rests after a failure.
    fn admit(&self) -> object_store::Result<()> {
        match &*self.down.lock().expect("store health lock") {
            Some(down) if Instant::now() < down.until => {
                Err(object_store::Error::Generic { store: "media store", source: Box::new(Resting(down.since.elapsed())) })
            }
            _ => Ok(()),
        }
    }

    /// Takes note of a call's outcome: a success makes the store available
    /// again, a failure meaning it cannot serve makes it unavailable (and
    /// rest); each change is logged once.
    fn observe<T>(&self, outcome: object_store::Result<T>) -> object_store::Result<T> {
        match &outcome {
            Ok(_) => {
                let was = self.down.lock().expect("store health lock").take();
                if let Some(down) = was {
                    tracing::info!(unavailable_for = ?down.since.elapsed(), "the object store answers again");
                }
            }
            Err(e) if unavailable(e) => {
                let now = Instant::now();
                let until = now + self.rest;
                let mut state = self.down.lock().expect("store health lock");
                match &mut *state {
                    Some(down) => down.until = until,
                    None => {
                        *state = Some(Down { since: now, until });
                        drop(state);
                        tracing::warn!(error = %e, "the object store is unavailable: its routes answer 503 until it answers again");
                    }
                }
            }
            Err(_) => {}
        }
        outcome
    }
}

/// An object store whose health is watched (see the module's notes).
#[derive(Debug)]
struct Guarded {
    inner: Box<dyn ObjectStore>,
    health: Arc<Health>,
}

impl fmt::Display for Guarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guarded({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Guarded {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> object_store::Result<PutResult> {
        self.health.admit()?;
        self.health.observe(self.inner.put_opts(location, payload, opts).await)
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.health.admit()?;
        let upload = self.health.observe(self.inner.put_multipart_opts(location, opts).await)?;
        Ok(Box::new(GuardedUpload { inner: upload, health: self.health.clone() }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.health.admit()?;
        self.health.observe(self.inner.get_opts(location, options).await)
    }

    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        self.health.admit()?;
        self.health.observe(self.inner.head(location).await)
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.health.admit()?;
        self.health.observe(self.inner.delete(location).await)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match self.health.admit() {
            Ok(()) => self.inner.list(prefix),
            Err(e) => futures_util::stream::once(async move { Err(e) }).boxed(),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.health.admit()?;
        self.health.observe(self.inner.list_with_delimiter(prefix).await)
    }

    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.health.admit()?;
        self.health.observe(self.inner.copy(from, to).await)
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.health.admit()?;
        self.health.observe(self.inner.copy_if_not_exists(from, to).await)
    }
}

/// A multipart upload to a [`Guarded`] store, its parts watched too.
#[derive(Debug)]
struct GuardedUpload {
    inner: Box<dyn MultipartUpload>,
    health: Arc<Health>,
}

#[async_trait::async_trait]
impl MultipartUpload for GuardedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let (part, health) = (self.inner.put_part(data), self.health.clone());
        Box::pin(async move { health.observe(part.await) })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.health.observe(self.inner.complete().await)
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(store: &str) -> Config {
        let mut c = Config::for_tests(std::env::temp_dir().join(format!("hub-storage-{}", uuid::Uuid::now_v7())), None);
        c.media_store = store.into();
        c
    }

    #[test]
    fn failures_meaning_the_store_cannot_serve_are_503_others_500() {
        use object_store::Error::*;
        let source = |text: &str| -> Box<dyn std::error::Error + Send + Sync> { text.into() };
        let missing = |code: &str| NotFound { path: "t/b/o".into(), source: source(&format!("404 Not Found: <Error><Code>{code}</Code></Error>")) };
        for e in [
            Generic { store: "S3", source: source("HTTP error: error sending request: Connection refused") },
            PermissionDenied { path: "t/b/o".into(), source: source("403 Forbidden") },
            Unauthenticated { path: "t/b/o".into(), source: source("401 Unauthorized") },
            missing("NoSuchBucket"),
        ] {
            assert!(unavailable(&e), "{e}");
            assert!(matches!(failure(e, "the media store"), ApiError::StoreUnavailable(RETRY_AFTER)));
        }
        for e in [missing("NoSuchKey"), Precondition { path: "t/b/o".into(), source: source("412") }, AlreadyExists { path: "t".into(), source: source("409") }]
        {
            assert!(!unavailable(&e), "{e}");
            assert!(matches!(failure(e, "the media store"), ApiError::Internal(_)));
        }
    }

    /// A loopback stand-in for an S3-compatible service: answers every
    /// request 503 while `failing`, else 200 with an ETag; counts them.
    async fn stand_in_s3(failing: Arc<std::sync::atomic::AtomicBool>, asked: Arc<std::sync::atomic::AtomicUsize>) -> u16 {
        use std::sync::atomic::Ordering::SeqCst;
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (failing, asked) = (failing.clone(), asked.clone());
                tokio::spawn(async move {
                    let mut tcp = tokio::io::BufReader::new(tcp);
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if tcp.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = tcp.read_exact(&mut body).await;
                    asked.fetch_add(1, SeqCst);
                    let answer: &[u8] = if failing.load(SeqCst) {
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nETag: \"e1\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    };
                    let _ = tcp.get_mut().write_all(answer).await;
                });
            }
        });
        port
    }

    /// A store that keeps failing is found unavailable once (one warning),
    /// then not called while it rests; once it answers again, that is
    /// logged once too.
    #[tokio::test]
    async fn a_failing_store_is_logged_once_rests_then_recovers() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).with_writer(move || writer.clone()).finish();
        // The current-thread runtime runs the store's calls on this thread.
        let _guard = tracing::subscriber::set_default(subscriber);
        let (failing, asked) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
        let port = stand_in_s3(failing.clone(), asked.clone()).await;
        let s3 = AmazonS3Builder::new()
            .with_endpoint(format!("http://127.0.0.1:{port}"))
            .with_allow_http(true)
            .with_bucket_name("media")
            .with_region("us-east-1")
            .with_access_key_id("k")
            .with_secret_access_key("s")
            .with_retry(s3_retries())
            .build()
            .unwrap();
        let store = guarded(s3, Duration::from_millis(300));
        let path = Path::from("t/b/o");
        let put = || store.put(&path, PutPayload::from_static(b"x"));

        let e = put().await.unwrap_err();
        assert!(unavailable(&e), "{e}");
        assert_eq!(asked.load(SeqCst), 1 + s3_retries().max_retries, "the first call and its retries");
        let e = put().await.unwrap_err();
        assert!(unavailable(&e) && e.to_string().contains("not called again yet"), "{e}");
        assert_eq!(asked.load(SeqCst), 1 + s3_retries().max_retries, "resting: not called");
        tokio::time::sleep(Duration::from_millis(350)).await;
        put().await.unwrap_err();
        assert_eq!(asked.load(SeqCst), 2 * (1 + s3_retries().max_retries), "tried again after its rest");

        failing.store(false, SeqCst);
        tokio::time::sleep(Duration::from_millis(350)).await;
        put().await.unwrap();
        put().await.unwrap();
        let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
        assert_eq!(text.matches("the object store is unavailable").count(), 1, "{text}");
        assert_eq!(text.matches("the object store answers again").count(), 1, "{text}");
    }

    /// A writer that keeps what the log subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_setting_names_a_store_or_is_refused() {
        assert!(open(&config("file")).is_ok());
        assert!(open(&config("s3://media-bucket/tenants")).is_ok(), "building an S3 store reaches no network");
        for bad in ["s3://", "ftp://x", "bucket"] {
            assert!(open(&config(bad)).is_err(), "{bad}");
        }
    }
}
