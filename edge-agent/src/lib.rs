//! The robot edge agent. It holds a QUIC connection to the hub, receives its
//! asset's commands, runs each through a handler program, acknowledges it,
//! and reports twin state and sensor readings on the same connection.
//!
//! The agent never touches SQL and never depends on the hub crate: the only
//! contract between them is `protocol::command`.

pub mod client;
pub mod handler;
pub mod journal;
pub mod outbox;
pub mod runner;

pub use protocol;
