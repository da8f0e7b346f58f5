//! Integration tests of the hub over HTTP, on SQLite and PostgreSQL.

mod helpers;

mod authority;
mod devices;
mod credentials;
mod exchange;
mod gate;
mod identity;
mod isolation;
mod process;
mod replicas;
mod schema;
mod spine;
