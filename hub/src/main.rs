//! The `hub` command: `hub serve` runs the gateway, `hub migrate` applies
//! the database migrations and exits, `hub rotate-signing-key` rotates the
//! token signing key with the hub down (as the operator route does with it
//! up).

use clap::{Parser, Subcommand};
use hub_kernel::{config::Config, db::Db};

/// mimalloc rather than the system allocator: each request allocates and
/// frees many small buffers (headers, bodies, JSON), and glibc's malloc
/// was about a tenth of the hub's CPU under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "hub", version, about = "The platform's HTTP gateway")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP gateway.
    Serve(Config),
    /// Apply pending database migrations and exit.
    Migrate(Config),
    /// Rotate the token signing key and exit (for a hub that is down; with
    /// it up, `POST /admin/security/rotate-signing-key`). Prints the
    /// rotation as JSON; the retired key verifies for the human token
    /// lifetime.
    RotateSigningKey(RotateArgs),
}

#[derive(clap::Args)]
struct RotateArgs {
    #[command(flatten)]
    config: Config,
    /// Why the key is rotated.
    #[arg(long, default_value = "manual emergency rotation")]
    reason: String,
    /// Who rotates it.
    #[arg(long, default_value = "ops-emergency")]
    actor_id: String,
}

/// The operator a CLI rotation is recorded under in the platform chain.
const CLI_OPERATOR: &str = "hub-cli";

/// A text argument trimmed; blank: the default.
fn or_default(value: &str, default: &str) -> String {
    let v = value.trim();
    if v.is_empty() { default.to_string() } else { v.to_string() }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = match &cli.command {
        Command::Serve(config) | Command::Migrate(config) => config,
        Command::RotateSigningKey(args) => &args.config,
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("HUB_LOG").unwrap_or_else(|_| "info,sqlx=warn".into());
    let export = match config.otlp_endpoint.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        Some(endpoint) => Some(hub::telemetry::otlp(endpoint)?),
        None => None,
    };
    // A subcommand whose answer is its standard output logs to stderr.
    hub::telemetry::init(filter, config.log_format, export.as_ref(), matches!(cli.command, Command::RotateSigningKey(_)));
    let done = match cli.command {
        Command::Serve(config) => hub::serve(config).await,
        Command::Migrate(config) => {
            std::fs::create_dir_all(&config.data_dir)?;
            let db = Db::connect(&config.database_url()).await?;
            db.migrate().await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::RotateSigningKey(args) => {
            let config = args.config;
            std::fs::create_dir_all(&config.data_dir)?;
            let db = Db::connect(&config.database_url()).await?;
            db.migrate().await?;
            let master = hub_kernel::crypto::MasterKey::load(config.master_key.as_deref(), &config.data_dir, config.dev)?;
            let grace = chrono::Duration::seconds(config.token_ttl_seconds);
            let (reason, actor_id) = (or_default(&args.reason, "manual emergency rotation"), or_default(&args.actor_id, "ops-emergency"));
            let rotation = hub_kernel::security::rotate_signing_key(&db, &master, grace, CLI_OPERATOR, &reason, &actor_id).await?;
            println!("{}", serde_json::to_string(&rotation)?);
            Ok(())
        }
    };
    // The last spans go out before the process ends (the SDK blocks on
    // its export thread, which needs the runtime).
    if let Some(export) = export {
        let _ = tokio::task::spawn_blocking(move || export.shutdown()).await;
    }
    done
}
