//! The `edge-agent` command: `run` holds the robot's command stream;
//! `report` queues a twin state or sensor readings for the next send.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use edge_agent::{outbox::Outbox, runner::RunArgs};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(name = "edge-agent", version, about = "The robot edge agent")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Connect to the hub and handle the asset's commands until stopped.
    Run(RunArgs),
    /// Queue a report for the hub in the state directory's outbox.
    Report {
        #[arg(long, env = "EDGE_STATE_DIR")]
        state_dir: PathBuf,
        /// The twin's reported state, a JSON object.
        #[arg(long, conflicts_with = "reading")]
        state: Option<String>,
        /// A reading `sensor_id=value`, repeatable.
        #[arg(long)]
        reading: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_env("EDGE_LOG").unwrap_or_else(|_| "info".into())).init();
    match Cli::parse().command {
        Cmd::Run(args) => edge_agent::runner::run(args).await,
        Cmd::Report { state_dir, state, reading } => {
            let body = match state {
                Some(s) => {
                    let v: Value = serde_json::from_str(&s).context("--state must be JSON")?;
                    anyhow::ensure!(v.is_object(), "--state must be a JSON object");
                    json!({ "state": v })
                }
                None => {
                    anyhow::ensure!(!reading.is_empty(), "give --state or at least one --reading");
                    let mut readings = Vec::new();
                    for r in reading {
                        let (sensor, value) = r.split_once('=').context("--reading must be sensor_id=value")?;
                        let value: f64 = value.trim().parse().context("a reading's value must be a number")?;
                        readings.push(json!({ "sensor_id": sensor.trim(), "value": value }));
                    }
                    json!({ "readings": readings })
                }
            };
            let path = Outbox::open(&state_dir)?.put(&body)?;
            println!("{}", path.display());
            Ok(())
        }
    }
}
