//! device-core: the on-device (hdk) surfaces, offline on SQLite, exposed to
//! mobile apps through uniffi.
