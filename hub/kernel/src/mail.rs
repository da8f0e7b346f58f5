//! Mail: the `MailSender` through which the hub delivers verification
//! tokens, the log sender of development mode, and the SMTP sender (lettre
//! over rustls) configured by `HUB_SMTP_URL` and `HUB_MAIL_FROM`.
//!
//! Outside development mode a token never reaches the log: without SMTP
//! settings the hub starts with verification email switched off, and
//! `send-verification-email` answers 503 (`AppState::mailer`).

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use lettre::{
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
    message::{
        Mailbox,
        header::{ContentType, MIME_VERSION_1_0},
    },
};

use crate::config::Config;

/// Delivers verification tokens.
pub trait MailSender: Send + Sync {
    /// Hands a token over for delivery and returns at once: the answer
    /// takes the same time whether or not the email is known (no account
    /// probing), and a delivery failure goes to the log, never the token.
    fn send_verification(&self, email: &str, token: &str, expires_at: &str);
    /// Hands a password-reset token over for delivery, as
    /// [`MailSender::send_verification`] does.
    fn send_password_reset(&self, email: &str, token: &str, expires_at: &str);
}

/// What a message carries: the token of an email verification or of a
/// password reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Verification,
    PasswordReset,
}

/// Development mode only: writes the token to the server log (RULINGS 3).
pub struct LogMailSender;

impl MailSender for LogMailSender {
    fn send_verification(&self, email: &str, token: &str, expires_at: &str) {
        tracing::info!(email, token, expires_at, "verification email (log sender, development mode)");
    }
    fn send_password_reset(&self, email: &str, token: &str, expires_at: &str) {
        tracing::info!(email, token, expires_at, "password reset email (log sender, development mode)");
    }
}

/// How long one SMTP delivery may take before it is given up.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends verification mail through an SMTP relay.
#[derive(Clone)]
pub struct SmtpMailSender {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl SmtpMailSender {
    /// `url` is `smtp://[user:pass@]host[:port]` (plain; `?tls=required`
    /// for STARTTLS) or `smtps://...` (TLS from the first byte); `from` the
    /// sender's address, optionally with a name (`Hub <hub@example.com>`).
    /// Credentials are refused on a plain connection to anything but
    /// loopback, where they would cross the network in clear text.
    pub fn new(url: &str, from: &str) -> anyhow::Result<SmtpMailSender> {
        let parsed = url::Url::parse(url).map_err(|_| anyhow::anyhow!("HUB_SMTP_URL is not a URL"))?;
        let tls = parsed.query_pairs().find(|(k, _)| k == "tls").map(|(_, v)| v.into_owned());
        let plain = parsed.scheme() == "smtp" && tls.as_deref().is_none_or(|t| t == "opportunistic");
        // smtp is not a scheme the URL standard knows, so its host comes
        // back as text even when it is an address.
        let loopback = parsed
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case("localhost") || h.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()));
        if plain && parsed.password().is_some() && !loopback {
            anyhow::bail!("HUB_SMTP_URL carries credentials over a plain connection: use smtps:// or smtp://...?tls=required");
        }
        // lettre's own errors may quote the URL, credentials included.
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|_| anyhow::anyhow!("HUB_SMTP_URL must be smtp://[user:pass@]host[:port][?tls=required] or smtps://..."))?
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        let from = from.parse::<Mailbox>().context("HUB_MAIL_FROM must be an email address, optionally with a name")?;
        Ok(SmtpMailSender { transport, from })
    }

    /// Sends one verification message and waits for the relay's answer.
    pub async fn deliver(&self, email: &str, token: &str, expires_at: &str) -> anyhow::Result<()> {
        self.deliver_for(Purpose::Verification, email, token, expires_at).await
    }

    /// Sends one message of `purpose` and waits for the relay's answer.
    pub async fn deliver_for(&self, purpose: Purpose, email: &str, token: &str, expires_at: &str) -> anyhow::Result<()> {
        let to = email.parse::<Mailbox>().context("the recipient is not an email address")?;
        let (subject, body) = match purpose {
            Purpose::Verification => (
                "Verify your email address",
                format!(
                    "Your email verification token is:\n\n    {token}\n\nIt can be used once, until {expires_at}.\n\
                     If you did not ask to verify this address, ignore this message.\n"
                ),
            ),
            Purpose::PasswordReset => (
                "Reset your password",
                format!(
                    "Your password reset token is:\n\n    {token}\n\nIt can be used once, until {expires_at}.\n\
                     If you did not ask to reset your password, ignore this message: your password stays as it is.\n"
                ),
            ),
        };
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .message_id(Some(message_id(&self.from)))
            // RFC 2045: a message with MIME header fields says which MIME.
            .header(MIME_VERSION_1_0)
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .context("building the message")?;
        self.transport.send(message).await.context("sending through the SMTP relay")?;
        Ok(())
    }
}

/// A `Message-ID` (RFC 5322 3.6.4): a random left part, unique to the
/// message, at the sender's domain.
fn message_id(from: &Mailbox) -> String {
    format!("<{}@{}>", uuid::Uuid::new_v4().simple(), from.email.domain())
}

impl SmtpMailSender {
    /// Delivers in the background: the caller's answer does not wait for
    /// the relay, and a failure goes to the log, never the token.
    fn spawn(&self, purpose: Purpose, email: &str, token: &str, expires_at: &str) {
        let (sender, email, token, expires_at) = (self.clone(), email.to_string(), token.to_string(), expires_at.to_string());
        tokio::spawn(async move {
            match sender.deliver_for(purpose, &email, &token, &expires_at).await {
                Ok(()) => tracing::debug!(?purpose, "email delivered"),
                Err(e) => tracing::warn!(?purpose, error = %format!("{e:#}"), "an email could not be delivered"),
            }
        });
    }
}

impl MailSender for SmtpMailSender {
    fn send_verification(&self, email: &str, token: &str, expires_at: &str) {
        self.spawn(Purpose::Verification, email, token, expires_at);
    }
    fn send_password_reset(&self, email: &str, token: &str, expires_at: &str) {
        self.spawn(Purpose::PasswordReset, email, token, expires_at);
    }
}

/// The sender a configuration calls for: SMTP when `HUB_SMTP_URL` is set
/// (then `HUB_MAIL_FROM` is required), else the log sender in development
/// mode, else none (verification email switched off).
pub fn from_config(config: &Config) -> anyhow::Result<Option<Arc<dyn MailSender>>> {
    let url = config.smtp_url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    let from = config.mail_from.as_deref().map(str::trim).filter(|f| !f.is_empty());
    match (url, from) {
        (Some(url), Some(from)) => Ok(Some(Arc::new(SmtpMailSender::new(url, from)?))),
        (Some(_), None) => anyhow::bail!("HUB_SMTP_URL needs HUB_MAIL_FROM, the sender's address"),
        (None, _) if config.dev => Ok(Some(Arc::new(LogMailSender))),
        (None, _) => {
            tracing::warn!("no HUB_SMTP_URL: verification email is switched off (send-verification-email answers 503)");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::Write,
        sync::{Arc, Mutex},
    };

    use super::*;

    fn config(dev: bool, url: Option<&str>, from: Option<&str>) -> Config {
        let mut c = Config::for_tests(std::env::temp_dir(), None);
        c.dev = dev;
        c.smtp_url = url.map(str::to_string);
        c.mail_from = from.map(str::to_string);
        c
    }

    fn refusal(c: &Config) -> String {
        match from_config(c) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[tokio::test]
    async fn the_sender_follows_the_settings() {
        assert!(from_config(&config(true, None, None)).unwrap().is_some(), "development mode logs");
        assert!(from_config(&config(false, None, Some("hub@example.com"))).unwrap().is_none(), "production without SMTP sends nothing");
        assert!(from_config(&config(false, Some("smtp://127.0.0.1:2525"), Some("Hub <hub@example.com>"))).unwrap().is_some());
        assert!(from_config(&config(false, Some("smtps://u:p@mail.example.com"), Some("hub@example.com"))).unwrap().is_some());
        assert!(from_config(&config(false, Some("smtp://u:p@mail.example.com:587?tls=required"), Some("hub@example.com"))).unwrap().is_some());
        assert!(from_config(&config(false, Some("smtp://u:p@localhost:25"), Some("hub@example.com"))).unwrap().is_some());
        assert!(from_config(&config(false, Some("smtp://u:p@127.0.0.1:2525"), Some("hub@example.com"))).unwrap().is_some());
        assert!(from_config(&config(false, Some("smtp://u:p@[::1]:2525"), Some("hub@example.com"))).unwrap().is_some());
        assert!(refusal(&config(false, Some("smtp://127.0.0.1"), None)).contains("HUB_MAIL_FROM"));
        assert!(refusal(&config(false, Some("smtp://127.0.0.1"), Some("not an address"))).contains("HUB_MAIL_FROM"));
        let plain = refusal(&config(false, Some("smtp://user:s3cret@mail.example.com:587"), Some("hub@example.com")));
        assert!(plain.contains("plain connection") && !plain.contains("s3cret"), "{plain}");
        let plain = refusal(&config(false, Some("smtp://user:s3cret@10.0.0.7:25?tls=opportunistic"), Some("hub@example.com")));
        assert!(plain.contains("plain connection"), "{plain}");
        let bad = refusal(&config(false, Some("imap://user:s3cret@mail.example.com"), Some("hub@example.com")));
        assert!(bad.contains("HUB_SMTP_URL") && !bad.contains("s3cret"), "{bad}");
    }

    #[test]
    fn message_ids_are_unique_at_the_senders_domain() {
        let from: Mailbox = "Hub <hub@mail.example.com>".parse().unwrap();
        let (a, b) = (message_id(&from), message_id(&from));
        assert_ne!(a, b);
        for id in [a, b] {
            let left = id.strip_prefix('<').and_then(|i| i.strip_suffix("@mail.example.com>")).unwrap_or_else(|| panic!("{id}"));
            assert!(left.len() == 32 && left.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
    }

    /// A writer that keeps what the log subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_failed_smtp_delivery_is_logged_without_the_token() {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).with_writer(move || writer.clone()).finish();
        // The current-thread runtime polls the spawned delivery on this thread.
        let _guard = tracing::subscriber::set_default(subscriber);
        // A port nothing listens on: the delivery fails at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let sender = SmtpMailSender::new(&format!("smtp://127.0.0.1:{port}"), "hub@example.com").unwrap();
        let token = "tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0";
        sender.send_verification("ada@example.com", token, "2030-01-01T00:00:00.000000Z");
        let start = std::time::Instant::now();
        loop {
            let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
            if text.contains("could not be delivered") {
                assert!(!text.contains(token), "the token reached the log: {text}");
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no delivery failure logged: {text}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
