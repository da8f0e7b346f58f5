//! The command stream over QUIC (quinn + rustls on aws-lc-rs). The agent
//! opens one bidirectional stream, says `Hello` with its per-robot
//! credential, and the hub pushes the asset's deliverable commands in
//! stream order as CBOR frames (`protocol::command`); acks, twin reports and
//! readings come back on the same stream.
//!
//! Delivery is at-least-once: each new connection starts from the first
//! command not yet acknowledged. In development mode the hub creates a
//! self-signed certificate (`quic-cert.pem`, `quic-key.pem`) in its data
//! dir; in production the certificate and key come from settings.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use protocol::command::{self as wire, AgentFrame, HubFrame};
use quinn::{RecvStream, SendStream};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::sync::mpsc;

use crate::{
    asset, command,
    feed::Feed,
    robots::{self, RobotCredential},
};
use hub_kernel::{error::ApiError, state::AppState};

/// Application close codes of the command stream.
pub const CLOSE_REFUSED: u32 = 1;
pub const CLOSE_PROTOCOL: u32 = 2;

/// A running QUIC endpoint.
pub struct QuicServer {
    pub addr: SocketAddr,
    endpoint: quinn::Endpoint,
    task: tokio::task::JoinHandle<()>,
}

impl QuicServer {
    /// Closes every connection and stops accepting.
    pub async fn stop(self) {
        self.endpoint.close(0u32.into(), b"hub stopping");
        self.task.abort();
        // Let the close frames leave before the socket goes.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
    }
}

/// Installs aws-lc-rs as the process's rustls provider (the hub already
/// links it); a second call is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// The certificate chain and key in force: from settings, or in development
/// mode a self-signed pair kept in the data dir.
fn load_identity(state: &AppState) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let config = &state.config;
    let (cert_path, key_path) = match (&config.quic_cert, &config.quic_key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        (None, None) if config.dev => {
            let (c, k) = (config.data_dir.join("quic-cert.pem"), config.data_dir.join("quic-key.pem"));
            if !c.exists() || !k.exists() {
                write_self_signed(&c, &k)?;
            }
            (c, k)
        }
        (None, None) => anyhow::bail!("HUB_QUIC_CERT and HUB_QUIC_KEY are required outside development mode (or HUB_QUIC_LISTEN=off)"),
        _ => anyhow::bail!("HUB_QUIC_CERT and HUB_QUIC_KEY must be set together"),
    };
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .with_context(|| format!("reading {}", cert_path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert_path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "{} holds no certificate", cert_path.display());
    let key = PrivateKeyDer::from_pem_file(&key_path).with_context(|| format!("reading the key {}", key_path.display()))?;
    Ok((certs, key))
}

fn write_self_signed(cert_path: &Path, key_path: &Path) -> anyhow::Result<()> {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(names).context("generating the development certificate")?;
    // The key first, private to the owner, so a crash never leaves a
    // certificate without its key.
    let key_pem = signing_key.serialize_pem();
    write_private(key_path, key_pem.as_bytes())?;
    std::fs::write(cert_path, cert.pem()).with_context(|| format!("writing {}", cert_path.display()))?;
    tracing::warn!(cert = %cert_path.display(), "development mode: created a self-signed QUIC certificate");
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

fn server_config(state: &AppState) -> anyhow::Result<quinn::ServerConfig> {
    let (certs, key) = load_identity(state)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the QUIC certificate and key do not match")?;
    tls.alpn_protocols = vec![wire::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    // One stream per agent, small windows: thousands of idle robots must
    // cost little memory. Agents send keep-alives well inside the timeout.
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(2u32.into())
        .max_concurrent_uni_streams(0u32.into())
        .stream_receive_window((256u32 * 1024).into())
        .receive_window((512u32 * 1024).into())
        .send_window(512 * 1024)
        .max_idle_timeout(Some(Duration::from_secs(30).try_into()?));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// Binds the QUIC endpoint if one is configured.
pub async fn start(state: &AppState) -> anyhow::Result<Option<QuicServer>> {
    let Some(listen) = state.config.quic_addr()? else { return Ok(None) };
    install_crypto_provider();
    let endpoint = quinn::Endpoint::server(server_config(state)?, listen).with_context(|| format!("binding QUIC on {listen}"))?;
    let addr = endpoint.local_addr()?;
    let ep = endpoint.clone();
    let s = state.clone();
    let task = tokio::spawn(async move {
        while let Some(incoming) = ep.accept().await {
            let s = s.clone();
            tokio::spawn(async move {
                let remote = incoming.remote_address();
                if let Err(e) = serve_connection(s, incoming).await {
                    tracing::debug!(%remote, error = %e, "QUIC connection ended");
                }
            });
        }
    });
    Ok(Some(QuicServer { addr, endpoint, task }))
}

async fn read_frame(recv: &mut RecvStream) -> anyhow::Result<Option<AgentFrame>> {
    let mut prefix = [0u8; 4];
    match recv.read_exact(&mut prefix).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(0)) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = wire::frame_len(prefix)?;
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body).await?;
    Ok(Some(wire::unframe(&body)?))
}

async fn write_frame(send: &mut SendStream, frame: &HubFrame) -> anyhow::Result<()> {
    send.write_all(&wire::frame(frame)?).await?;
    Ok(())
}

/// Sends `Refused` and closes once the peer has had the chance to read it.
async fn refuse(conn: &quinn::Connection, mut send: SendStream, code: &str, message: &str) -> anyhow::Result<()> {
    write_frame(&mut send, &HubFrame::Refused { code: code.into(), message: message.into() }).await?;
    let _ = send.finish();
    let _ = tokio::time::timeout(Duration::from_secs(2), send.stopped()).await;
    conn.close(CLOSE_REFUSED.into(), code.as_bytes());
    Ok(())
}

async fn serve_connection(state: AppState, incoming: quinn::Incoming) -> anyhow::Result<()> {
    let conn = incoming.await?;
    let (mut send, mut recv) = tokio::time::timeout(Duration::from_secs(10), conn.accept_bi()).await.context("no stream opened")??;
    let hello = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut recv)).await.context("no hello")??;
    let Some(AgentFrame::Hello { asset_id, credential, agent }) = hello else {
        conn.close(CLOSE_PROTOCOL.into(), b"expected hello");
        anyhow::bail!("the first frame was not a hello");
    };
    let cred = match robots::authenticate(&state, &credential).await {
        Ok(c) if c.asset_id == asset_id => c,
        Ok(_) => return refuse(&conn, send, "not_found", "the credential is not bound to this asset").await,
        Err(ApiError::RateLimited(secs)) => return refuse(&conn, send, "rate_limited", &format!("retry after {secs} s")).await,
        Err(ApiError::Unauthorized(why)) => return refuse(&conn, send, "unauthorized", why).await,
        Err(e) => {
            tracing::error!(error = %e, "authenticating a robot");
            return refuse(&conn, send, "internal", "the hub could not check the credential").await;
        }
    };
    tracing::info!(asset_id = %asset_id, agent = %agent, remote = %conn.remote_address(), "robot connected over QUIC");
    let _connected = Connected::quic();
    write_frame(&mut send, &HubFrame::Welcome { asset_id: asset_id.clone() }).await?;

    // One writer owns the send half; the pump and the reader queue frames.
    let (out, mut out_rx) = mpsc::channel::<HubFrame>(64);
    let writer = tokio::spawn(async move {
        while let Some(f) = out_rx.recv().await {
            if write_frame(&mut send, &f).await.is_err() {
                break;
            }
        }
    });
    let pump = tokio::spawn(pump(state.clone(), conn.clone(), cred.clone(), out.clone()));
    let result = read_loop(&state, &cred, &mut recv, &out).await;
    pump.abort();
    drop(out);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    tracing::info!(asset_id = %asset_id, "robot disconnected");
    result
}

/// Pushes the asset's deliverable commands, from the first one not yet
/// acknowledged, then every one that becomes deliverable; a revoked or
/// expired credential is refused and the connection closed.
async fn pump(state: AppState, conn: quinn::Connection, cred: Arc<RobotCredential>, out: mpsc::Sender<HubFrame>) {
    let mut feed = Feed::new(state, cred, 0);
    loop {
        let next = tokio::select! {
            next = feed.next() => next,
            _ = conn.closed() => return,
        };
        let Some(batch) = next else {
            let _ = out.send(HubFrame::Refused { code: "unauthorized".into(), message: "robot credential expired or revoked".into() }).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            conn.close(CLOSE_REFUSED.into(), b"unauthorized");
            return;
        };
        let last = batch.last().map(|c| c.seq).unwrap_or_default();
        for c in batch {
            if out.send(HubFrame::Command(c)).await.is_err() {
                return;
            }
        }
        feed.sent(last).await;
    }
}

async fn read_loop(state: &AppState, cred: &RobotCredential, recv: &mut RecvStream, out: &mpsc::Sender<HubFrame>) -> anyhow::Result<()> {
    while let Some(frame) = read_frame(recv).await? {
        let reply = match frame {
            AgentFrame::Ack(a) => match command::apply_ack(state, cred, &a.command_id, command::ack_from_frame(&a)).await {
                Ok(cmd) => HubFrame::AckResult { command_id: a.command_id, status: cmd.status().to_string(), accepted: true, message: None },
                Err(e) => HubFrame::AckResult { command_id: a.command_id, status: refusal_status(&e), accepted: false, message: Some(e.to_string()) },
            },
            AgentFrame::ReportState { report_id, state: reported } => match asset::record_state(state, &cred.asset_id, &reported).await {
                Ok(()) => HubFrame::Reported { report_id },
                // A malformed report can never succeed: confirm it so the
                // agent drops it instead of resending it forever.
                Err(ApiError::Validation(d)) => {
                    tracing::warn!(details = ?d, "discarding an invalid report");
                    HubFrame::Reported { report_id }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "storing a twin report");
                    continue;
                }
            },
            AgentFrame::Readings { report_id, readings } => match asset::record_readings(state, &cred.asset_id, &readings).await {
                Ok(_) => HubFrame::Reported { report_id },
                // A malformed report can never succeed: confirm it so the
                // agent drops it instead of resending it forever.
                Err(ApiError::Validation(d)) => {
                    tracing::warn!(details = ?d, "discarding an invalid report");
                    HubFrame::Reported { report_id }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "storing readings");
                    continue;
                }
            },
            AgentFrame::Hello { .. } => anyhow::bail!("a second hello on one connection"),
        };
        if out.send(reply).await.is_err() {
            break;
        }
    }
    Ok(())
}

/// How a refused ack is reported: `error:internal` means "try again later";
/// every other refusal is final.
fn refusal_status(e: &ApiError) -> String {
    match e {
        ApiError::NotFound => "error:not_found".into(),
        ApiError::Conflict(_) => "error:conflict".into(),
        ApiError::Validation(_) => "error:invalid".into(),
        _ => "error:internal".into(),
    }
}

/// Counts a connected agent in `hub_agents_connected` while it lives.
struct Connected;

impl Connected {
    fn quic() -> Self {
        metrics::gauge!("hub_agents_connected", "transport" => "quic").increment(1.0);
        Connected
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        metrics::gauge!("hub_agents_connected", "transport" => "quic").decrement(1.0);
    }
}
