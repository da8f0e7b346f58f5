//! Runs the handler program for one command: the command as JSON on its
//! stdin, no shell in between. Exit 0 is success with stdout (JSON,
//! optional) as the ack's `data`; any other end is a failure with a `code`
//! and a `message` taken from stderr.

use std::{path::Path, process::Stdio};

use protocol::command::{Ack, Command};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// The JSON the handler reads on stdin.
pub fn input(cmd: &Command) -> Value {
    json!({
        "command_id": cmd.command_id,
        "type": cmd.kind,
        "params": cmd.params,
        "risk_class": cmd.risk_class,
        "target_component_id": cmd.target_component_id,
    })
}

/// Longest message taken from a handler's stderr.
const MAX_MESSAGE: usize = 2000;

pub async fn run(handler: &Path, cmd: &Command) -> Ack {
    let fail =
        |code: &str, message: String| Ack { command_id: cmd.command_id.clone(), ok: false, code: Some(code.to_string()), message: Some(message), data: None };
    let child = tokio::process::Command::new(handler).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return fail("handler_unavailable", format!("could not start the handler {}: {e}", handler.display())),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let body = serde_json::to_vec(&input(cmd)).expect("JSON serialises");
        // A handler that does not read its input may close stdin early;
        // that is its choice, not a failure of the command.
        let _ = stdin.write_all(&body).await;
        let _ = stdin.shutdown().await;
    }
    let out = match child.wait_with_output().await {
        Ok(o) => o,
        Err(e) => return fail("handler_failed", format!("waiting for the handler: {e}")),
    };
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let text = text.trim();
        let data = if text.is_empty() {
            None
        } else {
            // Non-JSON output is kept as a string rather than lost.
            Some(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())))
        };
        return Ack { command_id: cmd.command_id.clone(), ok: true, code: None, message: None, data };
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let code = match out.status.code() {
        Some(n) => format!("exit_{n}"),
        None => "killed_by_signal".to_string(),
    };
    let message = if stderr.is_empty() {
        format!("the handler ended with {}", out.status)
    } else {
        let start = stderr.len().saturating_sub(MAX_MESSAGE);
        let start = (start..stderr.len()).find(|i| stderr.is_char_boundary(*i)).unwrap_or(stderr.len());
        stderr[start..].to_string()
    };
    fail(&code, message)
}
