//! The hand-off of signed inbound webhooks: the group that owns a kind
//! (`voice`, `email`, `notification`, ...) registers a handler; the
//! webhook group verifies a request and passes its payload to the kind's
//! handler inside the transaction that records it, so what the handler
//! writes and the receipt land together or not at all.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::{db::Tx, error::ApiResult};

/// What a kind does with a verified payload of one of its providers; it
/// answers what the sender is told (the `data` of the 200).
pub trait InboundHandler: Send + Sync {
    fn handle<'a>(&'a self, tx: &'a mut Tx, tenant_id: &'a str, provider: &'a str, payload: &'a Value) -> BoxFuture<'a, ApiResult<Value>>;
}

/// The handlers by kind.
#[derive(Default)]
pub struct Registry(RwLock<HashMap<String, Arc<dyn InboundHandler>>>);

impl Registry {
    pub fn register(&self, kind: &str, handler: Arc<dyn InboundHandler>) {
        self.0.write().expect("inbound registry").insert(kind.to_string(), handler);
    }

    pub fn get(&self, kind: &str) -> Option<Arc<dyn InboundHandler>> {
        self.0.read().expect("inbound registry").get(kind).cloned()
    }
}
