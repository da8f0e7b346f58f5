//! The `hub` command: `hub serve` runs the gateway, `hub migrate` applies
//! the database migrations and exits.

use clap::{Parser, Subcommand};
use hub_kernel::{config::Config, db::Db};

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (Command::Serve(config) | Command::Migrate(config)) = &cli.command;
    let filter = tracing_subscriber::EnvFilter::try_from_env("HUB_LOG").unwrap_or_else(|_| "info,sqlx=warn".into());
    let export = match config.otlp_endpoint.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        Some(endpoint) => Some(hub::telemetry::otlp(endpoint)?),
        None => None,
    };
    hub::telemetry::init(filter, config.log_format, export.as_ref());
    let done = match cli.command {
        Command::Serve(config) => hub::serve(config).await,
        Command::Migrate(config) => {
            std::fs::create_dir_all(&config.data_dir)?;
            let db = Db::connect(&config.database_url()).await?;
            db.migrate().await?;
            tracing::info!("migrations applied");
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
