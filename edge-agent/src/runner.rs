//! `edge-agent run`: connect, receive commands in order, run each once
//! through the handler (or re-acknowledge it from the journal), send
//! reports from the outbox, and reconnect with backoff forever.

use std::{
    collections::HashSet,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use protocol::command::{Ack, AgentFrame, Command, HubFrame};
use tokio::sync::Mutex;

use crate::{
    client::{self, OpenError, Sender},
    handler,
    journal::{EntryState, Journal},
    outbox::Outbox,
};

#[derive(Clone, Debug, clap::Args)]
pub struct RunArgs {
    /// The hub's QUIC address, host:port.
    #[arg(long, env = "EDGE_HUB_QUIC")]
    pub hub_quic: String,
    /// The TLS server name the hub's certificate must carry.
    #[arg(long, env = "EDGE_SERVER_NAME", default_value = "localhost")]
    pub server_name: String,
    /// PEM file of the CA certificate(s) to trust (in development: the
    /// hub's `quic-cert.pem`).
    #[arg(long, env = "EDGE_CA_FILE")]
    pub ca_file: PathBuf,
    /// The asset this robot is.
    #[arg(long, env = "EDGE_ASSET_ID")]
    pub asset_id: String,
    /// File holding the per-robot credential (read at every connect).
    #[arg(long, env = "EDGE_CREDENTIAL_FILE")]
    pub credential_file: PathBuf,
    /// Directory for the journal and the outbox.
    #[arg(long, env = "EDGE_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Program run once per command, without a shell.
    #[arg(long, env = "EDGE_HANDLER")]
    pub handler: PathBuf,
}

const MIN_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Runs until the process is stopped.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let journal = Arc::new(Journal::open(&args.state_dir)?);
    let outbox = Arc::new(Outbox::open(&args.state_dir)?);
    match journal.prune(Duration::from_secs(8 * 24 * 3600)) {
        Ok(n) if n > 0 => tracing::info!(removed = n, "pruned old journal entries"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "pruning the journal"),
    }
    let endpoint = client::endpoint(&args.ca_file)?;
    let mut backoff = MIN_BACKOFF;
    loop {
        let started = Instant::now();
        match session(&args, &endpoint, &journal, &outbox).await {
            Ok(()) => tracing::warn!("the hub closed the command stream"),
            Err(e) => match e.downcast_ref::<OpenError>() {
                Some(OpenError::Refused { code, message }) => tracing::error!(code = %code, message = %message, "the hub refused this agent"),
                _ => tracing::warn!(error = %format!("{e:#}"), "connection to the hub lost"),
            },
        }
        // A session that ran a while was healthy: start the backoff again.
        if started.elapsed() > Duration::from_secs(10) {
            backoff = MIN_BACKOFF;
        }
        let wait = jitter(backoff);
        tracing::info!(retry_in_ms = wait.as_millis() as u64, "reconnecting");
        tokio::time::sleep(wait).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// ±20 % so a fleet that lost the hub together does not return together.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|t| t.subsec_nanos()).unwrap_or(0);
    let factor = 0.8 + (nanos % 1000) as f64 / 1000.0 * 0.4;
    d.mul_f64(factor)
}

async fn session(args: &RunArgs, endpoint: &quinn::Endpoint, journal: &Arc<Journal>, outbox: &Arc<Outbox>) -> anyhow::Result<()> {
    let credential = std::fs::read_to_string(&args.credential_file).with_context(|| format!("reading {}", args.credential_file.display()))?.trim().to_string();
    let addr = client::resolve(&args.hub_quic).await?;
    let s = client::open(endpoint, addr, &args.server_name, &args.asset_id, &credential).await?;
    tracing::info!(hub = %addr, asset_id = %args.asset_id, "connected to the hub");
    let sender = Arc::new(Mutex::new(s.sender));
    let mut receiver = s.receiver;

    // Acks the hub may not have recorded before the last connection ended.
    for ack in journal.unconfirmed()? {
        tracing::info!(command_id = %ack.command_id, "sending an unconfirmed ack again");
        sender.lock().await.send(&AgentFrame::Ack(ack)).await?;
    }

    let in_flight = Arc::new(std::sync::Mutex::new(HashSet::<String>::new()));
    let reporter = tokio::spawn(report_loop(sender.clone(), outbox.clone(), in_flight.clone()));
    let result = async {
        while let Some(frame) = receiver.recv().await? {
            match frame {
                HubFrame::Command(cmd) => {
                    let ack = handle(args, journal, &cmd).await?;
                    sender.lock().await.send(&AgentFrame::Ack(ack)).await?;
                }
                HubFrame::AckResult { command_id, status, accepted, message } => {
                    if status == "error:internal" {
                        tracing::warn!(command_id = %command_id, "the hub could not record the ack; it will be sent again");
                    } else {
                        if !accepted {
                            tracing::warn!(command_id = %command_id, status = %status, message = ?message, "the hub refused the ack");
                        }
                        journal.confirm(&command_id)?;
                    }
                }
                HubFrame::Reported { report_id } => {
                    outbox.done(&report_id);
                    in_flight.lock().expect("in-flight lock").remove(&report_id);
                }
                HubFrame::Refused { code, message } => {
                    return Err(OpenError::Refused { code, message }.into());
                }
                HubFrame::Welcome { .. } => {}
            }
        }
        Ok(())
    }
    .await;
    reporter.abort();
    result
}

/// Runs a command once; a command the journal knows is answered from it.
async fn handle(args: &RunArgs, journal: &Journal, cmd: &Command) -> anyhow::Result<Ack> {
    match journal.get(&cmd.command_id)? {
        Some(e) if e.state == EntryState::Done => {
            tracing::info!(command_id = %cmd.command_id, "already handled: acknowledging again without running");
            Ok(e.ack.expect("a done entry has its ack"))
        }
        Some(_) => {
            tracing::warn!(command_id = %cmd.command_id, "the agent stopped while this command ran: reporting it interrupted, not running it again");
            let ack = Ack {
                command_id: cmd.command_id.clone(),
                ok: false,
                code: Some("interrupted".into()),
                message: Some("the agent stopped while the handler ran; the command was not run again".into()),
                data: None,
            };
            journal.finish(&ack)?;
            Ok(ack)
        }
        None => {
            journal.start(&cmd.command_id)?;
            tracing::info!(command_id = %cmd.command_id, kind = %cmd.kind, seq = cmd.seq, "running the handler");
            let ack = handler::run(&args.handler, cmd).await;
            tracing::info!(command_id = %cmd.command_id, ok = ack.ok, code = ?ack.code, "handler finished");
            journal.finish(&ack)?;
            Ok(ack)
        }
    }
}

/// Sends waiting reports every second; each is sent once per connection
/// and deleted when the hub confirms it.
async fn report_loop(sender: Arc<Mutex<Sender>>, outbox: Arc<Outbox>, in_flight: Arc<std::sync::Mutex<HashSet<String>>>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let frames = match outbox.pending() {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "reading the outbox");
                continue;
            }
        };
        for f in frames {
            let id = match &f {
                AgentFrame::ReportState { report_id, .. } | AgentFrame::Readings { report_id, .. } => report_id.clone(),
                _ => continue,
            };
            if !in_flight.lock().expect("in-flight lock").insert(id.clone()) {
                continue;
            }
            tracing::debug!(report_id = %id, "sending a report");
            if sender.lock().await.send(&f).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(dir: &std::path::Path, handler: PathBuf) -> RunArgs {
        RunArgs {
            hub_quic: "127.0.0.1:1".into(),
            server_name: "localhost".into(),
            ca_file: dir.join("ca.pem"),
            asset_id: "a".into(),
            credential_file: dir.join("cred"),
            state_dir: dir.to_path_buf(),
            handler,
        }
    }

    fn script(dir: &std::path::Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("h.sh");
        std::fs::write(&path, format!("#!/bin/sh\necho run >> {}/runs\n{body}\n", dir.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn cmd(id: &str) -> Command {
        Command {
            command_id: id.into(),
            seq: 1,
            kind: "move".into(),
            params: json!({ "x": 1 }),
            risk_class: "low".into(),
            target_component_id: None,
            expires_at: "2999-01-01T00:00:00.000000Z".into(),
        }
    }

    fn runs(dir: &std::path::Path) -> usize {
        std::fs::read_to_string(dir.join("runs")).unwrap_or_default().lines().count()
    }

    #[tokio::test]
    async fn a_command_runs_once_and_is_acknowledged_again_from_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let a = args(dir.path(), script(dir.path(), r#"cat > /dev/null; printf '{"moved":true}'"#));
        let journal = Journal::open(dir.path()).unwrap();
        let first = handle(&a, &journal, &cmd("c-1")).await.unwrap();
        assert_eq!((first.ok, first.data.clone()), (true, Some(json!({ "moved": true }))));
        let again = handle(&a, &journal, &cmd("c-1")).await.unwrap();
        assert_eq!(again, first);
        assert_eq!(runs(dir.path()), 1);
    }

    #[tokio::test]
    async fn a_failing_handler_gives_its_exit_code_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let a = args(dir.path(), script(dir.path(), "echo 'jammed' >&2; exit 3"));
        let ack = handle(&a, &Journal::open(dir.path()).unwrap(), &cmd("c-2")).await.unwrap();
        assert_eq!((ack.ok, ack.code.as_deref(), ack.message.as_deref()), (false, Some("exit_3"), Some("jammed")));
        let missing = args(dir.path(), dir.path().join("no-such-handler"));
        let ack = handle(&missing, &Journal::open(dir.path()).unwrap(), &cmd("c-3")).await.unwrap();
        assert_eq!(ack.code.as_deref(), Some("handler_unavailable"));
    }

    #[tokio::test]
    async fn a_command_interrupted_by_a_crash_is_reported_not_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let a = args(dir.path(), script(dir.path(), "exit 0"));
        let journal = Journal::open(dir.path()).unwrap();
        // What a crash while the handler ran leaves behind.
        journal.start("c-4").unwrap();
        let ack = handle(&a, &journal, &cmd("c-4")).await.unwrap();
        assert_eq!((ack.ok, ack.code.as_deref()), (false, Some("interrupted")));
        assert_eq!(runs(dir.path()), 0);
        assert_eq!(journal.unconfirmed().unwrap(), vec![ack]);
    }
}
