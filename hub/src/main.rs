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
    let filter = tracing_subscriber::EnvFilter::try_from_env("HUB_LOG").unwrap_or_else(|_| "info,sqlx=warn".into());
    // HUB_LOG_FORMAT=json: one JSON object a line, the request's span (its
    // id) included, for log collectors.
    match std::env::var("HUB_LOG_FORMAT").as_deref().map(str::trim) {
        Ok("json") => tracing_subscriber::fmt().json().with_env_filter(filter).init(),
        Ok("text" | "") | Err(_) => tracing_subscriber::fmt().with_env_filter(filter).init(),
        Ok(other) => anyhow::bail!("HUB_LOG_FORMAT must be text or json, not {other:?}"),
    }
    match Cli::parse().command {
        Command::Serve(config) => hub::serve(config).await,
        Command::Migrate(config) => {
            std::fs::create_dir_all(&config.data_dir)?;
            let db = Db::connect(&config.database_url()).await?;
            db.migrate().await?;
            tracing::info!("migrations applied");
            Ok(())
        }
    }
}
