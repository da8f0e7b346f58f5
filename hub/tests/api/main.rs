//! Integration tests of the hub over HTTP, on SQLite and PostgreSQL.

mod helpers;

mod abuse;
mod agents;
mod assets;
mod assignment;
mod audit;
mod audit_fault;
mod authority;
mod catalogue;
mod commands;
mod config;
mod connections;
mod containment;
mod contract;
mod credentials;
mod device_sync;
mod devices;
mod dispatch;
mod exchange;
mod feature_flags;
mod gate;
mod geo;
mod identity;
mod isolation;
mod mail;
mod mcp_client;
mod operations;
mod process;
mod quic;
mod replicas;
mod residency;
mod schema;
mod spine;
mod tenant_lifecycle;
mod workflow;
