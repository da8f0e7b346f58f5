//! Reports waiting to go to the hub: JSON files in `<state dir>/outbox/`,
//! dropped there by the robot's own software (or by `edge-agent report`),
//! sent in name order and deleted once the hub has stored them.
//!
//! A file holds either `{ "state": { ... } }` (the twin's reported state)
//! or `{ "readings": [ { "sensor_id", "value", "recorded_at"? } ] }`.
//! Writers create `*.tmp` and rename to `*.json`, so the agent never reads
//! a half-written report.

use std::path::{Path, PathBuf};

use anyhow::Context;
use protocol::command::{AgentFrame, Reading};
use serde::Deserialize;
use serde_json::Value;

use crate::journal::write_atomic;

#[derive(Deserialize)]
struct File {
    state: Option<Value>,
    readings: Option<Vec<Reading>>,
}

pub struct Outbox {
    dir: PathBuf,
}

impl Outbox {
    pub fn open(state_dir: &Path) -> anyhow::Result<Outbox> {
        let dir = state_dir.join("outbox");
        std::fs::create_dir_all(dir.join("rejected")).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Outbox { dir })
    }

    /// Reports waiting, oldest name first, as frames whose `report_id` is
    /// the file name. Unreadable files move to `outbox/rejected/`.
    pub fn pending(&self) -> anyhow::Result<Vec<AgentFrame>> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            let path = self.dir.join(&name);
            let parsed = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<File>(&b).ok());
            match parsed {
                Some(File { state: Some(state), readings: None }) if state.is_object() => out.push(AgentFrame::ReportState { report_id: name, state }),
                Some(File { state: None, readings: Some(readings) }) => out.push(AgentFrame::Readings { report_id: name, readings }),
                _ => {
                    tracing::warn!(file = %path.display(), "not a valid report: moved to outbox/rejected");
                    let _ = std::fs::rename(&path, self.dir.join("rejected").join(&name));
                }
            }
        }
        Ok(out)
    }

    /// The hub stored the report: forget it.
    pub fn done(&self, report_id: &str) {
        if report_id.contains('/') || report_id.contains("..") {
            return;
        }
        let _ = std::fs::remove_file(self.dir.join(report_id));
    }

    /// Queues a report (used by `edge-agent report`).
    pub fn put(&self, body: &Value) -> anyhow::Result<PathBuf> {
        let name = format!("{}-{}.json", chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ"), std::process::id());
        let path = self.dir.join(name);
        write_atomic(&path, &serde_json::to_vec(body)?)?;
        Ok(path)
    }
}
