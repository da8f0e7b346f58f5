//! The hub kernel: what every catalogue area builds on and which knows no
//! group. Settings, the database, the error envelope and the extractors,
//! validation, crypto, the gate, the application state, the audit chain
//! and its emitter, mail, the command wake-up bus, and what a URL the hub
//! calls may carry and how the log shows it.
//!
//! Where the gate needs what only an area knows (an API key's row, a
//! persona's permissions, a robot credential), it declares a trait in
//! `gate::directory` that the area implements and the hub binary injects.

pub mod audit;
pub mod body;
pub mod bus;
pub mod catalogue;
pub mod config;
pub mod contract;
pub mod crypto;
pub mod db;
pub mod error;
pub mod extract;
pub mod gate;
pub mod inbound;
pub mod mail;
pub mod nesting;
pub mod nul;
pub mod outbound;
pub mod prelude;
pub mod search;
pub mod state;
pub mod storage;
pub mod types;
pub mod validate;
