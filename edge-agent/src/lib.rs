//! The robot edge agent. It holds a QUIC connection to the hub, receives its
//! asset's commands, runs each through a handler and acknowledges it.
//!
//! The command stream arrives with the robot command path (issue 5); until
//! then the crate only re-exports the wire types it will speak, so the
//! workspace layout and dependency direction (edge-agent -> protocol, never
//! edge-agent -> hub) are fixed from the start.

pub use protocol;
