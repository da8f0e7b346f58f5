//! The device-core integration tests: one binary, one module per surface.

mod attestation;
mod identity;
mod outbox;
mod policy;
mod python;
mod registry;
mod store;
mod sync;

use device_core::store::Store;

/// A fresh store in its own temporary directory (kept alive by the guard).
pub fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("device.db");
    let store = Store::open(path.to_str().unwrap()).expect("open store");
    (dir, store)
}
