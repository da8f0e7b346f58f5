//! Wire types shared across processes: QUIC command-stream frames and device
//! sync batches, serialised as CBOR. No I/O lives here.

pub mod command;

use serde::{Serialize, de::DeserializeOwned};

/// Encodes a frame as CBOR.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ciborium::ser::Error<std::io::Error>> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out)?;
    Ok(out)
}

/// Decodes a CBOR frame.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ciborium::de::Error<std::io::Error>> {
    ciborium::from_reader(bytes)
}
