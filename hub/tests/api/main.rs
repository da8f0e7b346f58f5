//! Integration tests of the hub over HTTP, on SQLite and PostgreSQL.

mod helpers;

mod assets;
mod authority;
mod commands;
mod credentials;
mod exchange;
mod gate;
mod identity;
mod isolation;
mod process;
mod quic;
mod replicas;
mod schema;
mod spine;
