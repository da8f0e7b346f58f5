//! The QUIC side of the agent: a client endpoint that trusts one CA, and a
//! session (one connection, one bidirectional stream of length-prefixed CBOR
//! frames) that has said `Hello` and been welcomed.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use protocol::command::{self as wire, AgentFrame, HubFrame};
use quinn::{RecvStream, SendStream};
use rustls::pki_types::{CertificateDer, pem::PemObject};

/// A client endpoint trusting the certificates in `ca_file` (PEM).
pub fn endpoint(ca_file: &Path) -> anyhow::Result<quinn::Endpoint> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_file).with_context(|| format!("reading {}", ca_file.display()))? {
        roots.add(cert.with_context(|| format!("parsing {}", ca_file.display()))?)?;
    }
    anyhow::ensure!(!roots.is_empty(), "{} holds no certificate", ca_file.display());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![wire::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    // Keep-alives well inside the hub's 30 s idle timeout; a lost hub is
    // noticed within 15 s even when it could not say goodbye.
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(Duration::from_secs(5))).max_idle_timeout(Some(Duration::from_secs(15).try_into()?));
    config.transport_config(Arc::new(transport));
    let bind: SocketAddr = "0.0.0.0:0".parse().expect("static address");
    let mut ep = quinn::Endpoint::client(bind)?;
    ep.set_default_client_config(config);
    Ok(ep)
}

/// Why a session could not start.
#[derive(Debug)]
pub enum OpenError {
    /// The hub refused the credential or the asset; retrying will not help
    /// until something changes on the hub side.
    Refused { code: String, message: String },
    /// Network or protocol trouble; retry.
    Transport(anyhow::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Refused { code, message } => write!(f, "the hub refused the connection: {code}: {message}"),
            OpenError::Transport(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for OpenError {}

impl From<anyhow::Error> for OpenError {
    fn from(e: anyhow::Error) -> Self {
        OpenError::Transport(e)
    }
}

/// The sending half of a session.
pub struct Sender {
    send: SendStream,
}

impl Sender {
    pub async fn send(&mut self, frame: &AgentFrame) -> anyhow::Result<()> {
        self.send.write_all(&wire::frame(frame)?).await?;
        Ok(())
    }
}

/// The receiving half of a session.
pub struct Receiver {
    recv: RecvStream,
}

impl Receiver {
    /// The next frame, or `None` when the hub ended the stream.
    pub async fn recv(&mut self) -> anyhow::Result<Option<HubFrame>> {
        let mut prefix = [0u8; 4];
        match self.recv.read_exact(&mut prefix).await {
            Ok(()) => {}
            Err(quinn::ReadExactError::FinishedEarly(0)) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let mut body = vec![0u8; wire::frame_len(prefix)?];
        self.recv.read_exact(&mut body).await?;
        Ok(Some(wire::unframe(&body)?))
    }
}

/// A welcomed session.
pub struct Session {
    pub connection: quinn::Connection,
    pub sender: Sender,
    pub receiver: Receiver,
}

/// Connects, says hello and waits for the welcome.
pub async fn open(endpoint: &quinn::Endpoint, addr: SocketAddr, server_name: &str, asset_id: &str, credential: &str) -> Result<Session, OpenError> {
    let connecting = endpoint.connect(addr, server_name).map_err(|e| OpenError::Transport(e.into()))?;
    let connection = tokio::time::timeout(Duration::from_secs(10), connecting)
        .await
        .map_err(|_| OpenError::Transport(anyhow::anyhow!("connecting timed out")))?
        .map_err(|e| OpenError::Transport(e.into()))?;
    let (send, recv) = connection.open_bi().await.map_err(|e| OpenError::Transport(e.into()))?;
    let mut sender = Sender { send };
    let mut receiver = Receiver { recv };
    sender
        .send(&AgentFrame::Hello {
            asset_id: asset_id.to_string(),
            credential: credential.to_string(),
            agent: concat!("edge-agent/", env!("CARGO_PKG_VERSION")).to_string(),
        })
        .await?;
    match tokio::time::timeout(Duration::from_secs(10), receiver.recv()).await {
        Err(_) => Err(OpenError::Transport(anyhow::anyhow!("no welcome from the hub"))),
        Ok(Err(e)) => Err(OpenError::Transport(e)),
        Ok(Ok(Some(HubFrame::Welcome { .. }))) => Ok(Session { connection, sender, receiver }),
        Ok(Ok(Some(HubFrame::Refused { code, message }))) => Err(OpenError::Refused { code, message }),
        Ok(Ok(other)) => Err(OpenError::Transport(anyhow::anyhow!("unexpected first frame from the hub: {other:?}"))),
    }
}

/// Resolves `host:port` (a name or an address).
pub async fn resolve(hub: &str) -> anyhow::Result<SocketAddr> {
    tokio::net::lookup_host(hub).await.with_context(|| format!("resolving {hub}"))?.next().with_context(|| format!("{hub} resolves to no address"))
}
