//! Every setting of the hub, from command-line flags or their environment
//! variables.

use std::{net::SocketAddr, path::PathBuf};

/// How the gateway treats requests without a valid credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GateMode {
    /// Refuse (401/403) what the gate does not admit.
    Enforce,
    /// Let it through and log what would have been refused (development
    /// mode only).
    Report,
    /// Skip the gate's checks (development mode only).
    Off,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people.
    Text,
    /// One JSON object a line, the request's span included, for collectors.
    Json,
}

#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// Address the HTTP server listens on.
    #[arg(long, env = "HUB_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory for the SQLite database and development-mode key files.
    #[arg(long, env = "HUB_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// `sqlite://...` or `postgres://...`; default: `hub.db` in the data dir.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Serve `GET /metrics` without a credential (otherwise it takes the
    /// operator's `x-admin-ops-token`, like `/admin/*`).
    #[arg(long, env = "HUB_METRICS_PUBLIC", value_parser = clap::builder::BoolishValueParser::new())]
    pub metrics_public: bool,
    /// Record metrics (`false`: no recorder, no per-request series, and
    /// `GET /metrics` answers 404).
    #[arg(long, env = "HUB_METRICS", default_value = "true", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    pub metrics: bool,
    /// `text`, or `json` (one JSON object a line, with the request's span).
    #[arg(long, env = "HUB_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Base URL of an OpenTelemetry collector (`http://collector:4318`):
    /// spans are exported to `<url>/v1/traces` as OTLP over HTTP. Off
    /// without it.
    #[arg(long, env = "HUB_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// The operator secret for `/admin/*` (header `x-admin-ops-token`).
    #[arg(long, env = "ADMIN_OPS_TOKEN", hide_env_values = true)]
    pub admin_ops_token: Option<String>,
    /// How long a replica trusts its cached copy of a database operator
    /// token (revocations are also broadcast, so this is the worst case).
    #[arg(long, env = "ADMIN_OPS_TOKEN_CACHE_TTL_MS", default_value_t = 30_000)]
    pub ops_token_cache_ttl_ms: u64,
    /// `enforce`, `report` or `off` (report and off need development mode).
    #[arg(long, env = "AUTH_GATE_MODE", value_enum, default_value = "enforce")]
    pub gate_mode: GateMode,
    /// Development mode: creates and keeps a master key in the data dir and
    /// returns verification tokens in responses.
    #[arg(long, env = "HUB_DEV", value_parser = clap::builder::BoolishValueParser::new())]
    pub dev: bool,
    /// 32-byte master key, hex or base64; required outside development mode.
    #[arg(long, env = "HUB_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,
    /// The hub's public URL, used as the `iss` claim of every JWT.
    #[arg(long, env = "HUB_PUBLIC_URL", default_value = "http://localhost:8080")]
    pub public_url: String,
    /// Lifetime of human JWTs in seconds.
    #[arg(long, env = "HUB_TOKEN_TTL_SECONDS", default_value_t = 3600)]
    pub token_ttl_seconds: i64,
    /// UDP address of the robots' QUIC command stream, or `off`.
    #[arg(long, env = "HUB_QUIC_LISTEN", default_value = "127.0.0.1:4433")]
    pub quic_listen: String,
    /// PEM certificate chain of the QUIC endpoint (required outside
    /// development mode, where a self-signed one is kept in the data dir).
    #[arg(long, env = "HUB_QUIC_CERT")]
    pub quic_cert: Option<PathBuf>,
    /// PEM private key of the QUIC endpoint.
    #[arg(long, env = "HUB_QUIC_KEY", hide_env_values = true)]
    pub quic_key: Option<PathBuf>,
    /// Milliseconds a client has to send a complete request head (HTTP/1.1;
    /// also the wait for a keep-alive connection's next request, and for a
    /// new connection's first request on either protocol).
    #[arg(long, env = "HUB_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,
    /// Seconds a connection may stay open with no request in flight.
    #[arg(long, env = "HUB_IDLE_TIMEOUT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_seconds: u64,
    /// Most HTTP connections open at once; further ones wait to be accepted.
    #[arg(long, env = "HUB_MAX_CONNECTIONS", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Milliseconds a client has to send a request's whole body, counted
    /// from its head; a body still incomplete then is answered 408 and its
    /// connection closed, so a body that never finishes holds nothing.
    #[arg(long, env = "HUB_BODY_READ_TIMEOUT_MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_read_timeout_ms: u64,
    /// Mebibytes that the request bodies being received may hold across
    /// the whole process; a body that would take more is answered 503 with
    /// `Retry-After` instead of more memory.
    #[arg(long, env = "HUB_BODY_MEMORY_MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(4..=65_536))]
    pub body_memory_mib: u64,
    /// Most concurrent streams a client may open on one HTTP/2 connection.
    #[arg(long, env = "HUB_HTTP2_MAX_STREAMS", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub http2_max_streams: u32,
    /// SMTP relay for verification mail: `smtp://[user:pass@]host[:port]`
    /// (add `?tls=required` for STARTTLS) or `smtps://...`. Without it,
    /// development mode writes tokens to the log and production switches
    /// verification email off (503).
    #[arg(long, env = "HUB_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// Sender of verification mail, `hub@example.com` or `Name <hub@...>`
    /// (required with HUB_SMTP_URL).
    #[arg(long, env = "HUB_MAIL_FROM")]
    pub mail_from: Option<String>,
    /// Most SSE command streams one robot credential may hold open at once
    /// on this hub; one more is refused with 429.
    #[arg(long, env = "HUB_MAX_SSE_PER_CREDENTIAL", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_sse_per_credential: u64,
    /// Average drive speed in km/h from which sdk-dispatch derives drive
    /// times (great-circle distance over this speed).
    #[arg(long, env = "DISPATCH_AVG_SPEED_KMH", default_value_t = 35.0, value_parser = drive_speed)]
    pub dispatch_avg_speed_kmh: f64,
    /// Where sdk-media keeps blob content: `file` (a `media` directory in
    /// the data dir), `file:///absolute/path`, or `s3://bucket[/prefix]`
    /// for S3 and S3-compatible stores (credentials, region and endpoint
    /// from the standard `AWS_*` variables: `AWS_ENDPOINT` for a
    /// compatible store, `AWS_ALLOW_HTTP=true` for a plain-HTTP one).
    #[arg(long, env = "HUB_MEDIA_STORE", default_value = "file")]
    pub media_store: String,
    /// The largest blob content accepted, bytes (at most 5 GiB).
    #[arg(long, env = "HUB_MEDIA_MAX_BYTES", default_value_t = 100 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=5 * 1024 * 1024 * 1024))]
    pub media_max_bytes: u64,
    /// Seconds a webhook receiver has to answer an attempt.
    #[arg(long, env = "HUB_WEBHOOK_TIMEOUT_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub webhook_timeout_seconds: u64,
    /// Hosts and addresses webhook deliveries may reach although they are
    /// private, loopback or link-local (comma-separated; development mode
    /// allows every such target).
    #[arg(long, env = "HUB_WEBHOOK_ALLOWED_HOSTS", value_delimiter = ',')]
    pub webhook_allowed_hosts: Vec<String>,
    /// Run the webhook delivery worker in this process (`false` for a
    /// replica that only serves the API while others deliver).
    #[arg(long, env = "HUB_WEBHOOK_WORKER", default_value = "true", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    pub webhook_worker: bool,
    /// Seconds between passes of the SLA sweep, which fires the escalation
    /// rungs of running clocks whose time has come (`sla.rung.fired.v1`,
    /// once per clock and rung whichever replica sweeps); 0 switches it off
    /// in this process.
    #[arg(long, env = "HUB_SLA_SWEEP_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub sla_sweep_seconds: u64,
    /// Seconds between passes of the agent-run sweep, which expires the
    /// `active` runs whose `ttl_deadline` has passed
    /// (`agent.run.expired.v1`, once per run whichever replica sweeps); 0
    /// switches it off in this process.
    #[arg(long, env = "HUB_AGENT_RUN_SWEEP_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub agent_run_sweep_seconds: u64,
    /// The operator's Ed25519 public key (64 hex characters) that
    /// sovereign bundle releases must be signed with; without it, a
    /// release is refused (503).
    #[arg(long, env = "HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY", value_parser = ed25519_public_key)]
    pub sovereign_bundle_public_key: Option<String>,
    /// Storm report feeds `POST /admin/storm/ingest-now` asks in order
    /// (comma-separated http(s) URLs) before its synthetic last provider.
    #[arg(long, env = "HUB_STORM_FEED_URLS", value_delimiter = ',', value_parser = http_url)]
    pub storm_feed_urls: Vec<String>,
}

/// An http or https URL.
fn http_url(s: &str) -> Result<String, String> {
    match url::Url::parse(s.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(s.trim().to_string()),
        _ => Err("must be an http or https URL".into()),
    }
}

/// An Ed25519 public key: 32 bytes as 64 hexadecimal characters.
fn ed25519_public_key(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("must be an Ed25519 public key: 64 hexadecimal characters".into())
    }
}

/// A drive speed: a number of km/h above 0 and at most 300.
fn drive_speed(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 300.0 => Ok(v),
        _ => Err("must be a number of km/h above 0 and at most 300".into()),
    }
}

impl Config {
    /// The database URL in force.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) if !url.trim().is_empty() => url.clone(),
            _ => format!("sqlite://{}?mode=rwc", self.data_dir.join("hub.db").display()),
        }
    }

    /// The QUIC listen address, or `None` when switched off.
    pub fn quic_addr(&self) -> anyhow::Result<Option<SocketAddr>> {
        match self.quic_listen.trim() {
            "" | "off" => Ok(None),
            addr => addr.parse().map(Some).map_err(|_| anyhow::anyhow!("HUB_QUIC_LISTEN must be host:port or off")),
        }
    }

    /// A configuration for tests and embedding: development mode, port 0.
    pub fn for_tests(data_dir: PathBuf, database_url: Option<String>) -> Self {
        Config {
            listen: "127.0.0.1:0".parse().expect("static address"),
            data_dir,
            database_url,
            admin_ops_token: Some("test-ops-token".into()),
            ops_token_cache_ttl_ms: 30_000,
            metrics_public: false,
            metrics: true,
            log_format: LogFormat::Text,
            otlp_endpoint: None,
            gate_mode: GateMode::Enforce,
            dev: true,
            master_key: Some("00".repeat(32)),
            public_url: "http://localhost".into(),
            token_ttl_seconds: 3600,
            quic_listen: "127.0.0.1:0".into(),
            quic_cert: None,
            quic_key: None,
            header_read_timeout_ms: 10_000,
            idle_timeout_seconds: 60,
            max_connections: 4096,
            body_read_timeout_ms: 15_000,
            body_memory_mib: 64,
            http2_max_streams: 64,
            max_sse_per_credential: 4,
            dispatch_avg_speed_kmh: 35.0,
            media_store: "file".into(),
            media_max_bytes: 100 * 1024 * 1024,
            webhook_timeout_seconds: 15,
            webhook_allowed_hosts: Vec::new(),
            webhook_worker: true,
            // Tests fire rungs by calling the sweep (`hub_crm::sla::fire_due`).
            sla_sweep_seconds: 0,
            // Tests expire runs by calling the sweep (`hub_ai::agent_runtime::expire_due`).
            agent_run_sweep_seconds: 0,
            smtp_url: None,
            mail_from: None,
            sovereign_bundle_public_key: None,
            storm_feed_urls: Vec::new(),
        }
    }
}
