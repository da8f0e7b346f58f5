//! End-to-end stories across processes: the `hub` and `edge-agent`
//! binaries run as real processes and talk over HTTP and QUIC on loopback.

mod harness;
mod robot;
