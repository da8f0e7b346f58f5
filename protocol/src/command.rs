//! The QUIC command stream between the hub and a robot's edge agent.
//!
//! One bidirectional QUIC stream per connection carries length-prefixed CBOR
//! frames: a big-endian `u32` byte length, then the CBOR encoding of an
//! [`AgentFrame`] (agent to hub) or a [`HubFrame`] (hub to agent). The agent
//! opens the stream and speaks first with [`AgentFrame::Hello`]; the hub
//! answers [`HubFrame::Welcome`] or [`HubFrame::Refused`] and then pushes the
//! asset's commands in stream order.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The ALPN protocol identifier of the command stream.
pub const ALPN: &[u8] = b"hub-cmd/1";

/// Frames larger than this are refused by both ends.
pub const MAX_FRAME: usize = 1 << 20;

/// What the agent sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentFrame {
    /// First frame: the per-robot credential and the asset it is bound to.
    Hello { asset_id: String, credential: String, agent: String },
    /// The outcome of one command; the hub answers [`HubFrame::AckResult`].
    Ack(Ack),
    /// The robot's latest reported twin state (replaces the previous one).
    ReportState { report_id: String, state: Value },
    /// A batch of sensor readings.
    Readings { report_id: String, readings: Vec<Reading> },
}

/// What the hub sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HubFrame {
    Welcome {
        asset_id: String,
    },
    /// The connection is refused; the hub closes it after this frame.
    Refused {
        code: String,
        message: String,
    },
    Command(Command),
    /// The ack was recorded (or was already recorded identically).
    AckResult {
        command_id: String,
        status: String,
        accepted: bool,
        message: Option<String>,
    },
    /// A state report or readings batch was stored.
    Reported {
        report_id: String,
    },
}

/// One command as the robot sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Command {
    pub command_id: String,
    /// Position in the asset's stream: increases in delivery order.
    pub seq: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub params: Value,
    pub risk_class: String,
    pub target_component_id: Option<String>,
    pub expires_at: String,
}

/// An acknowledgement: `ok` with optional `data`, or a failure with `code`
/// and `message`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    pub command_id: String,
    pub ok: bool,
    pub code: Option<String>,
    pub message: Option<String>,
    pub data: Option<Value>,
}

/// One sensor sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub sensor_id: String,
    pub value: f64,
    /// RFC 3339; the hub stamps its receive time when absent.
    pub recorded_at: Option<String>,
}

/// Encodes a frame with its length prefix.
pub fn frame<T: Serialize>(value: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; 4];
    ciborium::into_writer(value, &mut out).map_err(|e| FrameError::Encode(e.to_string()))?;
    let len = out.len() - 4;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    out[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(out)
}

/// Reads the length of the next frame from its 4-byte prefix.
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME { Err(FrameError::TooLarge(len)) } else { Ok(len) }
}

/// Decodes a frame body (without its prefix).
pub fn unframe<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    crate::decode(body).map_err(|e| FrameError::Decode(e.to_string()))
}

#[derive(Debug, PartialEq)]
pub enum FrameError {
    Encode(String),
    Decode(String),
    TooLarge(usize),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Encode(e) => write!(f, "encoding a frame: {e}"),
            FrameError::Decode(e) => write!(f, "decoding a frame: {e}"),
            FrameError::TooLarge(n) => write!(f, "frame of {n} bytes exceeds the limit of {MAX_FRAME}"),
        }
    }
}

impl std::error::Error for FrameError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_frame_nested_past_the_bound_is_refused_on_a_small_stack() {
        // A state report whose state is an array of one array of one array
        // ... 100,000 deep: one byte a level, so about 100 KB of CBOR. The
        // state is the frame's last field, so its null (0xf6) is last.
        let mut body = Vec::new();
        ciborium::into_writer(&AgentFrame::ReportState { report_id: "r".into(), state: Value::Null }, &mut body).unwrap();
        assert_eq!(body.pop(), Some(0xf6));
        body.extend(std::iter::repeat_n(0x81u8, 100_000));
        body.push(0x01);
        // On a thread with a worker's stack: refused, not an overflow.
        let outcome = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || unframe::<AgentFrame>(&body))
            .unwrap()
            .join()
            .expect("the decoder did not overflow its stack");
        match outcome {
            Err(FrameError::Decode(e)) => assert!(e.to_lowercase().contains("recursion"), "{e}"),
            other => panic!("expected a decode error, got {other:?}"),
        }
        // A state at the hub's JSON bound (64 levels) decodes, on the same stack.
        let mut state = json!(1);
        for _ in 0..64 {
            state = json!([state]);
        }
        let mut ok = Vec::new();
        ciborium::into_writer(&AgentFrame::ReportState { report_id: "r".into(), state }, &mut ok).unwrap();
        let decoded = std::thread::Builder::new().stack_size(2 * 1024 * 1024).spawn(move || unframe::<AgentFrame>(&ok).is_ok()).unwrap().join();
        assert_eq!(decoded.ok(), Some(true));
    }

    #[test]
    fn frames_round_trip_through_cbor_with_their_length_prefix() {
        let cmd = HubFrame::Command(Command {
            command_id: "c1".into(),
            seq: 7,
            kind: "move".into(),
            params: json!({ "x": 1.5, "tags": ["a"], "nested": { "ok": true } }),
            risk_class: "low".into(),
            target_component_id: None,
            expires_at: "2030-01-01T00:00:00.000000Z".into(),
        });
        let bytes = frame(&cmd).unwrap();
        let len = frame_len(bytes[..4].try_into().unwrap()).unwrap();
        assert_eq!(len, bytes.len() - 4);
        assert_eq!(unframe::<HubFrame>(&bytes[4..]).unwrap(), cmd);
        let ack = AgentFrame::Ack(Ack { command_id: "c1".into(), ok: false, code: Some("exit_3".into()), message: Some("m".into()), data: None });
        let bytes = frame(&ack).unwrap();
        assert_eq!(unframe::<AgentFrame>(&bytes[4..]).unwrap(), ack);
    }

    #[test]
    fn oversized_frames_are_refused() {
        assert_eq!(frame_len(((MAX_FRAME + 1) as u32).to_be_bytes()), Err(FrameError::TooLarge(MAX_FRAME + 1)));
        assert!(unframe::<HubFrame>(&[0xff, 0x00]).is_err());
    }
}
