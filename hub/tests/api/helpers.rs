//! Test harness: spawns the hub on port 0 with a fresh database (an SQLite
//! file, or a new PostgreSQL database when `HUB_TEST_POSTGRES_URL` is set)
//! and offers a client with typed helpers.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Declares a test that runs once on SQLite and once on PostgreSQL.
#[macro_export]
macro_rules! db_test {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::helpers::TestApp::spawn($crate::helpers::Backend::Sqlite).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(app) = $crate::helpers::TestApp::spawn_postgres().await {
                    super::$name(app).await
                }
            }
        }
    };
}

/// A test whose hub answered a status its document does not list fails
/// when its hub goes (every status a route answers is documented).
impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(server) = &self.server
            && !std::thread::panicking()
        {
            let undocumented = server.undocumented_statuses();
            assert!(undocumented.is_empty(), "answers whose status the document does not list: {undocumented:#?}");
        }
    }
}

pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub server: Option<hub::Server>,
    pub backend: Backend,
    pub database_url: String,
    /// Kept so the data directory lives as long as the hub.
    pub _dir: tempfile::TempDir,
}

/// A fresh PostgreSQL database on the test server, or `None` without one.
/// Under CI (`CI` set) a missing `HUB_TEST_POSTGRES_URL` fails the test
/// instead of skipping the PostgreSQL half silently.
pub async fn fresh_postgres_url() -> Option<String> {
    let Some(admin) = std::env::var("HUB_TEST_POSTGRES_URL").ok().filter(|s| !s.is_empty()) else {
        assert!(std::env::var_os("CI").is_none(), "CI is set but HUB_TEST_POSTGRES_URL is not: the PostgreSQL half of this test cannot run");
        return None;
    };
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&admin).await.expect("connect HUB_TEST_POSTGRES_URL");
    let name = format!("hubtest_{}", uuid::Uuid::now_v7().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.expect("create test database");
    let (base, query) = match admin.split_once('?') {
        Some((b, q)) => (b.to_string(), format!("?{q}")),
        None => (admin.clone(), String::new()),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let root = match base[scheme_end..].find('/') {
        Some(i) => base[..scheme_end + i].to_string(),
        None => base.clone(),
    };
    Some(format!("{root}/{name}{query}"))
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> TestApp {
        match backend {
            Backend::Sqlite => Self::spawn_with(Backend::Sqlite, None, |_| {}).await,
            Backend::Postgres => Self::spawn_postgres().await.expect("HUB_TEST_POSTGRES_URL"),
        }
    }

    pub async fn spawn_postgres() -> Option<TestApp> {
        let url = fresh_postgres_url().await?;
        Some(Self::spawn_with(Backend::Postgres, Some(url), |_| {}).await)
    }

    /// Spawns a hub with a configuration adjusted by `tweak`; `url` None
    /// means a new SQLite file.
    pub async fn spawn_with(backend: Backend, url: Option<String>, tweak: impl FnOnce(&mut hub_kernel::config::Config)) -> TestApp {
        let dir = tempfile::tempdir().expect("tempdir");
        let database_url = url.unwrap_or_else(|| format!("sqlite://{}?mode=rwc", dir.path().join("hub.db").display()));
        Self::spawn_on(backend, database_url, dir, tweak).await
    }

    /// Another hub with its own fresh database of the same backend and a
    /// configuration adjusted by `tweak`.
    pub async fn variant(&self, tweak: impl FnOnce(&mut hub_kernel::config::Config)) -> TestApp {
        let url = match self.backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(fresh_postgres_url().await.expect("postgres")),
        };
        Self::spawn_with(self.backend, url, tweak).await
    }

    /// A second hub on the same database (several replicas).
    pub async fn replica(&self) -> TestApp {
        let dir = tempfile::tempdir().expect("tempdir");
        // Replicas share one object store, as they do behind S3.
        let media = format!("file://{}", self._dir.path().join("media").display());
        Self::spawn_on(self.backend, self.database_url.clone(), dir, |c| c.media_store = media).await
    }

    async fn spawn_on(backend: Backend, database_url: String, dir: tempfile::TempDir, tweak: impl FnOnce(&mut hub_kernel::config::Config)) -> TestApp {
        let mut config = hub_kernel::config::Config::for_tests(PathBuf::from(dir.path()), Some(database_url.clone()));
        tweak(&mut config);
        let state = hub::prepare(config).await.expect("prepare hub");
        let server = hub::start(state).await.expect("start hub");
        TestApp { base: format!("http://{}", server.addr), client: reqwest::Client::new(), server: Some(server), backend, database_url, _dir: dir }
    }

    /// The event types recorded in a tenant's audit chains, oldest first:
    /// what a route's "its event in the same transaction" left behind.
    pub async fn events_of(&self, tenant_id: &Value) -> Vec<String> {
        sqlx::query_scalar("SELECT event_type FROM audit_entry WHERE tenant_id = $1 ORDER BY pool_index, seq")
            .bind(tenant_id.as_str().expect("a tenant id"))
            .fetch_all(&self.state().db.read)
            .await
            .unwrap()
    }

    pub fn state(&self) -> &hub_kernel::state::AppState {
        &self.server.as_ref().expect("running").state
    }

    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.client.request(method, format!("{}{}", self.base, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.expect("body");
        let value = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        (status, value)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        self.call(Method::GET, path, token, None).await
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, token, Some(body)).await
    }

    /// Signs up a tenant; returns the signup's `data` (with `token`).
    pub async fn signup(&self, email: &str, app_id: &str) -> Value {
        let (status, body) = self
            .post(
                "/api/auth/signup-tenant",
                None,
                json!({
                    "email": email, "password": "correct horse battery", "org_name": format!("Org {app_id}"),
                    "app_id": app_id, "display_name": "Ada Admin", "region": "eu-west-1",
                }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["data"].clone()
    }

    /// Creates an application and a key with `scopes`; returns (application_id, key data).
    pub async fn key(&self, token: &str, slug: &str, scopes: Value) -> (String, Value) {
        let (s, app) = self.post("/api/applications", Some(token), json!({ "name": slug, "slug": slug, "environment": "live" })).await;
        assert_eq!(s, StatusCode::CREATED, "{app}");
        let id = app["data"]["application_id"].as_str().unwrap().to_string();
        let (s, key) = self.post(&format!("/api/applications/{id}/keys"), Some(token), json!({ "name": "k", "scopes": scopes })).await;
        assert_eq!(s, StatusCode::CREATED, "{key}");
        (id, key["data"].clone())
    }
}

/// Waits into the next one-minute rate-limit window unless at least
/// `needed` seconds of the current one are left, so a test's requests are
/// not split between two windows.
pub async fn within_one_minute(needed: i64) {
    let secs = chrono::Utc::now().timestamp() % 60;
    if secs > 60 - needed {
        tokio::time::sleep(std::time::Duration::from_secs((61 - secs) as u64)).await;
    }
}

/// Decodes a JWT's claims without checking it (the hub checks it).
pub fn claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("jwt payload");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("base64url");
    serde_json::from_slice(&bytes).expect("claims json")
}

/// Asserts the platform error envelope with `error`.
#[track_caller]
pub fn assert_error(actual: (StatusCode, Value), status: u16, error: &str) -> Value {
    assert_eq!(actual.0.as_u16(), status, "body: {}", actual.1);
    assert_eq!(actual.1["success"], json!(false), "{}", actual.1);
    assert_eq!(actual.1["error"], json!(error), "{}", actual.1);
    actual.1
}

/// Two tenants, for isolation tests: A owns the resources a test creates,
/// B probes them with its person's token and with a key holding every
/// scope whose persona holds B's owner role (so only the tenant boundary
/// can refuse it).
pub struct TwoTenants {
    pub a: Value,
    pub b: Value,
    pub a_token: String,
    pub b_token: String,
    pub b_key: String,
}

impl TestApp {
    pub async fn two_tenants(&self, slug: &str) -> TwoTenants {
        let a = self.signup(&format!("a@{slug}.example.com"), &format!("{slug}-a")).await;
        let b = self.signup(&format!("b@{slug}.example.com"), &format!("{slug}-b")).await;
        let b_token = b["token"].as_str().unwrap().to_string();
        let (_, key) = self.key(&b_token, &format!("{slug}-b-all"), json!(["*"])).await;
        let owner = self.owner_template(&b_token, b["persona_id"].as_str().unwrap()).await;
        let (s, grant) =
            self.post("/api/role-assignments", Some(&b_token), json!({ "persona_id": key["synthetic_persona_id"], "role_template_id": owner })).await;
        assert_eq!(s, StatusCode::CREATED, "{grant}");
        TwoTenants { a_token: a["token"].as_str().unwrap().to_string(), b_key: key["api_key"].as_str().unwrap().to_string(), a, b, b_token }
    }

    /// Sets a generated inbound-webhook secret for (kind, provider) in the
    /// token's tenant; returns a sender of signed payloads of that pair,
    /// answering (status, body) for a `webhook-id` and a JSON payload.
    pub async fn inbound_sender(&self, token: &str, tenant_id: &Value, kind: &str, provider: &str) -> InboundSender<'_> {
        let (s, set) = self.post("/api/webhooks/inbound-secrets", Some(token), json!({ "kind": kind, "provider": provider })).await;
        assert_eq!(s, StatusCode::CREATED, "{set}");
        let tenant_id = tenant_id.as_str().expect("a tenant id");
        InboundSender {
            app: self,
            secret: set["data"]["secret"].as_str().unwrap().to_string(),
            url: format!("/api/webhooks/inbound/{kind}/{provider}?tenant_id={tenant_id}"),
        }
    }

    /// Registers a person and admits them to the owner's tenant (as a
    /// member holding no role); returns (their token for that tenant,
    /// their persona id).
    pub async fn member(&self, owner: &str, tenant_id: &Value, email: &str) -> (String, String) {
        let (s, reg) = self.post("/api/auth/register", None, json!({ "email": email, "password": "member password", "display_name": "M" })).await;
        assert_eq!(s, StatusCode::CREATED, "{reg}");
        let (s, m) = self.post("/api/memberships", Some(owner), json!({ "person_id": reg["data"]["person_id"] })).await;
        assert_eq!(s, StatusCode::CREATED, "{m}");
        let (_, login) = self.post("/api/auth/login", None, json!({ "email": email, "password": "member password", "tenant_id": tenant_id })).await;
        (login["data"]["token"].as_str().unwrap().to_string(), m["data"]["persona_id"].as_str().unwrap().to_string())
    }

    /// The role template a persona holds as its primary role (for a
    /// signup's persona: the owner template).
    pub async fn owner_template(&self, token: &str, persona: &str) -> Value {
        let (s, roles) = self.get(&format!("/api/personas/{persona}/roles"), Some(token)).await;
        assert_eq!(s, StatusCode::OK, "{roles}");
        roles["data"]["roles"][0]["role_template_id"].clone()
    }
}

/// A route of a test matrix: method and concrete path.
pub type Route = (Method, String);

/// A body that reaches past validation-free extraction on any POST route.
pub fn probe_body(method: &Method) -> Option<Value> {
    // Valid enough for each probed route's validation to pass, so that the
    // answer is the lookup's.
    (*method != Method::GET).then(|| {
        json!({
            "kind": "human", "name": "k", "scopes": ["*"], "reason": "stolen", "person_id": "0190a000-0000-7000-8000-000000000000",
            "method": "secure-enclave", "signature_envelope": { "challenge": "x" }, "ok": true, "approved": false, "desired": {}, "engaged": false,
        })
    })
}

/// Isolation: each of A's resources answers 404 to B's person and to B's
/// all-powerful key (never 403, which would confirm it exists). Routes for
/// which `human_only` holds refuse any key with 403 before looking up.
pub async fn assert_isolated(app: &TestApp, t: &TwoTenants, routes: &[Route], human_only: impl Fn(&str) -> bool) {
    for (method, path) in routes {
        let res = app.call(method.clone(), path, Some(&t.b_token), probe_body(method)).await;
        assert_eq!(res.0.as_u16(), 404, "{method} {path} with B's token: {}", res.1);
        assert_error(res, 404, "NotFound");
        let res = app.call(method.clone(), path, Some(&t.b_key), probe_body(method)).await;
        let expected = if human_only(path) { 403 } else { 404 };
        assert_eq!(res.0.as_u16(), expected, "{method} {path} with B's key: {}", res.1);
    }
}

/// Scopes: a key holding `granted` (none of which covers the routes') is
/// refused each route with 403 naming the route's scope and the key's.
pub async fn assert_scoped(app: &TestApp, owner_token: &str, granted: Value, routes: &[(Method, String, &str)]) {
    let (_, key) = app.key(owner_token, &format!("scoped-{}", uuid::Uuid::now_v7().simple()), granted.clone()).await;
    let secret = key["api_key"].as_str().unwrap();
    for (method, path, scope) in routes {
        let res = app.call(method.clone(), path, Some(secret), probe_body(method)).await;
        let body = assert_error(res, 403, "Forbidden");
        assert_eq!(body["required_scopes"], json!([scope]), "{method} {path}");
        assert_eq!(body["granted_scopes"], granted, "{method} {path}");
        let masked = format!("{}…{}", &secret[..8], &secret[secret.len() - 4..]);
        let detail = body["details"][0].as_str().unwrap();
        assert!(detail.contains(&masked) && detail.contains(scope), "{detail}");
        assert!(!body.to_string().contains(secret), "the secret never appears in a message");
    }
}

/// The stock clients some tests drive the hub with, from PyPI.
const PYTHON_PACKAGES: &[&str] = &["mcp==2.3.0", "prometheus-client==0.26.0", "standardwebhooks==1.1.0"];

/// A Python with [`PYTHON_PACKAGES`]: `HUB_TEST_PYTHON` (set by `.ci/run`),
/// or a virtual environment made once under the target directory. Built
/// beside its final place and renamed into it, so two test processes never
/// see a half-made one.
pub fn test_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("HUB_TEST_PYTHON") {
                return PathBuf::from(p);
            }
            let exe = std::env::current_exe().unwrap();
            let venv = exe.ancestors().nth(3).unwrap().join("python-tests");
            let python = venv.join("bin/python");
            let ready = |p: &Path| Command::new(p).args(["-c", "import mcp, prometheus_client, standardwebhooks"]).status().is_ok_and(|s| s.success());
            if !ready(&python) {
                let fresh = venv.with_extension(format!("tmp-{}", std::process::id()));
                let run = |cmd: &mut Command| assert!(cmd.status().expect("python3 runs").success(), "{cmd:?} failed");
                run(Command::new("python3").args(["-m", "venv"]).arg(&fresh));
                run(Command::new(fresh.join("bin/python")).args(["-m", "pip", "install", "-q"]).args(PYTHON_PACKAGES));
                let _ = std::fs::remove_dir_all(&venv);
                if std::fs::rename(&fresh, &venv).is_err() {
                    // Another process got there first.
                    let _ = std::fs::remove_dir_all(&fresh);
                }
                assert!(ready(&python), "the test packages are missing from {}", venv.display());
            }
            python
        })
        .clone()
}

/// Runs `hub/tests/python/<script>` with `args`, `input` as JSON on its
/// stdin; its stdout, parsed as JSON.
pub async fn run_python(script: &str, args: &[&str], input: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python").join(script);
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(test_python())
            .arg(&script)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the Python client starts");
        serde_json::to_writer(child.stdin.take().unwrap(), &input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{} failed:\n{}", script.display(), String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("a JSON report")
    })
    .await
    .unwrap()
}

/// Sends signed inbound webhooks of one (kind, provider) to one tenant.
pub struct InboundSender<'a> {
    app: &'a TestApp,
    secret: String,
    url: String,
}

impl InboundSender<'_> {
    pub async fn send(&self, webhook_id: &str, payload: Value) -> (StatusCode, Value) {
        let body = payload.to_string();
        let at = chrono::Utc::now().timestamp();
        let signature = standardwebhooks::Webhook::new(&self.secret).unwrap().sign(webhook_id, at, body.as_bytes()).unwrap();
        let res = self
            .app
            .client
            .post(format!("{}{}", self.app.base, self.url))
            .header("webhook-id", webhook_id)
            .header("webhook-timestamp", at.to_string())
            .header("webhook-signature", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        (res.status(), res.json().await.unwrap_or(Value::Null))
    }
}

/// The `hub` binary as a process of its own: its own metrics recorder and
/// environment. `hub serve` in development mode with the operator token
/// `test-ops-token`, on SQLite in a temporary directory unless `env` sets
/// `DATABASE_URL`; `env` is applied last. Its log is [`HubProcess::log`];
/// it is killed when dropped.
pub struct HubProcess {
    pub base: String,
    pub dir: tempfile::TempDir,
    child: std::process::Child,
}

impl HubProcess {
    pub async fn spawn(env: &[(&str, &str)]) -> HubProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // Logs go to a file: an unread pipe would fill up and block the hub.
        let log = std::fs::File::create(dir.path().join("hub.log")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hub"));
        cmd.arg("serve")
            .env("HUB_LISTEN", format!("127.0.0.1:{port}"))
            .env("HUB_DATA_DIR", dir.path())
            .env("HUB_DEV", "1")
            // Not the default UDP port: other tests run hubs at the same time.
            .env("HUB_QUIC_LISTEN", "127.0.0.1:0")
            .env("ADMIN_OPS_TOKEN", "test-ops-token")
            .env_remove("DATABASE_URL")
            .env_remove("AUTH_GATE_MODE")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log));
        for (name, value) in env {
            cmd.env(name, value);
        }
        let hub = HubProcess { base: format!("http://127.0.0.1:{port}"), child: cmd.spawn().expect("the hub binary starts"), dir };
        let client = reqwest::Client::new();
        let start = std::time::Instant::now();
        while !client.get(format!("{}/ready", hub.base)).send().await.is_ok_and(|r| r.status() == StatusCode::OK) {
            assert!(start.elapsed() < std::time::Duration::from_secs(60), "the hub did not start: {}", hub.log());
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        hub
    }

    /// What the hub has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("hub.log")).unwrap_or_default()
    }

    /// Signs up a tenant; returns the signup's `data` (with `token`).
    pub async fn signup(&self, email: &str, app_id: &str) -> Value {
        let body = json!({
            "email": email, "password": "correct horse battery", "org_name": format!("Org {app_id}"),
            "app_id": app_id, "display_name": "Ada Admin", "region": "eu-west-1",
        });
        let res = reqwest::Client::new().post(format!("{}/api/auth/signup-tenant", self.base)).json(&body).send().await.expect("request");
        let (status, body) = (res.status(), res.json::<Value>().await.unwrap_or(Value::Null));
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["data"].clone()
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
