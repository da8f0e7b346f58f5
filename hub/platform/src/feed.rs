//! The feed of one robot's command stream, shared by its two transports
//! (`sse` and `quic`): each turn checks the credential again, so a
//! revocation ends the stream at once, and reads the deliverable commands
//! after the last position sent (both at once; nothing is sent unless the
//! credential still holds); with none, it waits for the asset's
//! wake-up (or the safety re-check). A database error is retried after a
//! second rather than ending the stream.

use std::{sync::Arc, time::Duration};

use protocol::command::Command;
use tokio::sync::watch;

use crate::{
    command,
    robots::{self, RobotCredential},
};
use hub_kernel::{
    bus::{BATCH, SAFETY_RECHECK},
    state::AppState,
};

pub struct Feed {
    state: AppState,
    cred: Arc<RobotCredential>,
    wake: watch::Receiver<u64>,
    /// The stream position of the last command sent.
    last: i64,
}

impl Feed {
    /// A feed from after position `last` (0: every command not yet
    /// acknowledged).
    pub fn new(state: AppState, cred: Arc<RobotCredential>, last: i64) -> Feed {
        let wake = state.streams.subscribe(&cred.asset_id);
        Feed { state, cred, wake, last }
    }

    /// The next commands to send, waiting until there are some; `None`
    /// once the credential is revoked or expired. Cancel-safe: dropping the
    /// future loses nothing.
    pub async fn next(&mut self) -> Option<Vec<Command>> {
        loop {
            self.wake.borrow_and_update();
            // Both reads at once: the check decides whether the batch is sent.
            let (usable, batch) =
                tokio::join!(robots::still_usable(&self.state, &self.cred.credential_id), command::pending(&self.state, &self.cred.asset_id, self.last, BATCH));
            match usable {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    tracing::warn!(error = %e, "checking a robot credential");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
            match batch {
                Ok(batch) if !batch.is_empty() => return Some(batch),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "reading pending commands");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
            tokio::select! {
                _ = self.wake.changed() => {}
                _ = tokio::time::sleep(SAFETY_RECHECK) => {}
            }
        }
    }

    /// Records that the commands up to position `seq` were sent: they are
    /// `delivered` until acknowledged.
    pub async fn sent(&mut self, seq: i64) {
        self.last = seq;
        if let Err(e) = command::mark_delivered(&self.state, &self.cred.asset_id, seq).await {
            tracing::warn!(error = %e, "marking commands delivered");
        }
    }
}
