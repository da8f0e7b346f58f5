//! The journal in the state directory: one small file per command, written
//! atomically, so that a command already handled is acknowledged again and
//! never run again after a crash or a reconnect.
//!
//! An entry is `started` just before the handler runs and `done` (with its
//! ack) when it ended; `confirmed` once the hub has recorded the ack. A
//! `started` entry found later means the agent died while the handler ran:
//! the command is then acknowledged as failed (`interrupted`) instead of
//! being run a second time, because a robot must not repeat a physical
//! action nobody knows the outcome of.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use anyhow::Context;
use protocol::command::Ack;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub command_id: String,
    pub state: EntryState,
    pub ack: Option<Ack>,
    pub confirmed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    Started,
    Done,
}

pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    pub fn open(state_dir: &Path) -> anyhow::Result<Journal> {
        let dir = state_dir.join("journal");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Journal { dir })
    }

    fn path(&self, command_id: &str) -> anyhow::Result<PathBuf> {
        // Command ids are UUIDs; refuse anything that could leave the directory.
        anyhow::ensure!(!command_id.is_empty() && command_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'), "unexpected command id {command_id:?}");
        Ok(self.dir.join(format!("{command_id}.json")))
    }

    pub fn get(&self, command_id: &str) -> anyhow::Result<Option<Entry>> {
        let path = self.path(command_id)?;
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn put(&self, entry: &Entry) -> anyhow::Result<()> {
        let path = self.path(&entry.command_id)?;
        write_atomic(&path, &serde_json::to_vec(entry)?)
    }

    pub fn start(&self, command_id: &str) -> anyhow::Result<()> {
        self.put(&Entry { command_id: command_id.into(), state: EntryState::Started, ack: None, confirmed: false })
    }

    pub fn finish(&self, ack: &Ack) -> anyhow::Result<()> {
        self.put(&Entry { command_id: ack.command_id.clone(), state: EntryState::Done, ack: Some(ack.clone()), confirmed: false })
    }

    pub fn confirm(&self, command_id: &str) -> anyhow::Result<()> {
        if let Some(mut e) = self.get(command_id)?
            && !e.confirmed
        {
            e.confirmed = true;
            self.put(&e)?;
        }
        Ok(())
    }

    /// Acks the hub has not confirmed yet (to send again after a reconnect).
    pub fn unconfirmed(&self) -> anyhow::Result<Vec<Ack>> {
        let mut out = Vec::new();
        for item in std::fs::read_dir(&self.dir)? {
            let path = item?.path();
            if path.extension().is_some_and(|x| x == "json")
                && let Ok(bytes) = std::fs::read(&path)
                && let Ok(e) = serde_json::from_slice::<Entry>(&bytes)
                && !e.confirmed
                && let Some(ack) = e.ack
            {
                out.push(ack);
            }
        }
        out.sort_by(|a, b| a.command_id.cmp(&b.command_id));
        Ok(out)
    }

    /// Forgets confirmed entries older than `age` (their commands can no
    /// longer be delivered: a command lives at most a week).
    pub fn prune(&self, age: Duration) -> anyhow::Result<usize> {
        let mut removed = 0;
        let now = SystemTime::now();
        for item in std::fs::read_dir(&self.dir)? {
            let path = item?.path();
            let old = std::fs::metadata(&path).and_then(|m| m.modified()).is_ok_and(|t| now.duration_since(t).unwrap_or_default() > age);
            if old
                && let Ok(bytes) = std::fs::read(&path)
                && serde_json::from_slice::<Entry>(&bytes).is_ok_and(|e| e.confirmed)
            {
                std::fs::remove_file(&path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Writes a file so that a crash leaves either the old or the new content.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_goes_from_started_to_done_to_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        assert_eq!(j.get("c-1").unwrap(), None);
        j.start("c-1").unwrap();
        assert_eq!(j.get("c-1").unwrap().unwrap().state, EntryState::Started);
        let ack = Ack { command_id: "c-1".into(), ok: true, code: None, message: None, data: Some(serde_json::json!({"x": 1})) };
        j.finish(&ack).unwrap();
        assert_eq!(j.unconfirmed().unwrap(), vec![ack.clone()]);
        j.confirm("c-1").unwrap();
        assert!(j.unconfirmed().unwrap().is_empty());
        let again = Journal::open(dir.path()).unwrap().get("c-1").unwrap().unwrap();
        assert!(again.confirmed && again.ack == Some(ack));
        assert!(j.get("../etc/passwd").is_err());
    }
}
