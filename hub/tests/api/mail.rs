//! Verification and password-reset mail: delivered through an SMTP relay
//! outside development mode (to a fake relay on loopback here), never
//! written to the log, and switched off (503) when no relay is configured.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::TcpListener,
    sync::mpsc,
};

use crate::{db_test, helpers::*};

/// What the fake relay received in one session.
#[derive(Debug, Default)]
struct Received {
    auth: Option<Vec<u8>>,
    from: String,
    to: Vec<String>,
    data: String,
}

/// A loopback SMTP relay speaking just enough of RFC 5321 for lettre; each
/// message it accepts goes to the returned channel.
async fn fake_relay() -> (u16, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let (read, mut write) = tcp.into_split();
                let mut lines = BufReader::new(read).lines();
                let mut got = Received::default();
                write.write_all(b"220 relay.test ESMTP\r\n").await.unwrap();
                while let Ok(Some(line)) = lines.next_line().await {
                    let upper = line.to_ascii_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") {
                        b"250-relay.test\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n"
                    } else if let Some(creds) = line.strip_prefix("AUTH PLAIN ") {
                        use base64::Engine;
                        got.auth = base64::engine::general_purpose::STANDARD.decode(creds.trim()).ok();
                        b"235 2.7.0 accepted\r\n"
                    } else if upper.starts_with("MAIL FROM:") {
                        got.from = line[10..].split_whitespace().next().unwrap_or_default().to_string();
                        b"250 ok\r\n"
                    } else if upper.starts_with("RCPT TO:") {
                        got.to.push(line[8..].split_whitespace().next().unwrap_or_default().to_string());
                        b"250 ok\r\n"
                    } else if upper == "DATA" {
                        write.write_all(b"354 go ahead\r\n").await.unwrap();
                        while let Ok(Some(l)) = lines.next_line().await {
                            if l == "." {
                                break;
                            }
                            got.data.push_str(&l);
                            got.data.push('\n');
                        }
                        let _ = tx.send(std::mem::take(&mut got));
                        b"250 queued\r\n"
                    } else if upper == "QUIT" {
                        let _ = write.write_all(b"221 bye\r\n").await;
                        break;
                    } else if upper == "RSET" || upper == "NOOP" {
                        b"250 ok\r\n"
                    } else {
                        b"502 not implemented\r\n"
                    };
                    write.write_all(reply).await.unwrap();
                }
            });
        }
    });
    (port, rx)
}

/// The token in a verification message's body (the indented line).
fn token_in(data: &str) -> String {
    data.lines().find(|l| l.starts_with("    ")).map(|l| l.trim().to_string()).expect("a token line")
}

async fn verification_mail_goes_through_smtp_outside_development_mode(app: TestApp) {
    let (port, mut inbox) = fake_relay().await;
    let app = app
        .variant(move |c| {
            c.dev = false;
            // Outside development mode QUIC would need a certificate.
            c.quic_listen = "off".into();
            c.smtp_url = Some(format!("smtp://hub:relay-secret@127.0.0.1:{port}"));
            c.mail_from = Some("Hub <hub@example.com>".into());
        })
        .await;
    let (s, _) = app.post("/api/auth/register", None, json!({ "email": "mail@example.com", "password": "correct horse battery", "display_name": "M" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, sent) = app.post("/api/auth/send-verification-email", None, json!({ "email": "Mail@example.com" })).await;
    assert_eq!(s, StatusCode::OK, "{sent}");
    assert_eq!(sent["data"]["sent"], true);
    assert!(sent["data"].get("dev_token").is_none(), "outside development mode the token is only mailed: {sent}");

    let mail = tokio::time::timeout(Duration::from_secs(10), inbox.recv()).await.expect("a message within 10 s").unwrap();
    assert_eq!(mail.auth.as_deref(), Some(&b"\0hub\0relay-secret"[..]));
    assert_eq!(mail.from, "<hub@example.com>");
    assert_eq!(mail.to, vec!["<mail@example.com>".to_string()]);
    assert!(mail.data.contains("Subject: Verify your email address"), "{}", mail.data);
    // RFC 5322 3.6.4: a Message-ID, unique on the left, the sender's domain
    // on the right; RFC 2045: MIME-Version beside the Content-Type.
    let head: Vec<&str> = mail.data.split("\n\n").next().unwrap().lines().collect();
    let header = |name: &str| -> Vec<&str> { head.iter().filter_map(|l| l.strip_prefix(name)?.strip_prefix(": ")).collect() };
    let ids = header("Message-ID");
    assert_eq!(ids.len(), 1, "{}", mail.data);
    let left = ids[0].strip_prefix('<').and_then(|id| id.strip_suffix("@example.com>")).unwrap_or_else(|| panic!("Message-ID {}", ids[0]));
    assert!(left.len() >= 16 && !left.contains(['@', '<', '>', ' ']), "Message-ID {}", ids[0]);
    assert_eq!(header("MIME-Version"), ["1.0"], "{}", mail.data);
    assert_eq!(header("Content-Type"), ["text/plain; charset=utf-8"], "{}", mail.data);
    assert!(mail.data.contains(sent["data"]["expires_at"].as_str().unwrap()), "{}", mail.data);
    let token = token_in(&mail.data);
    let (s, v) = app.post("/api/auth/verify-email", None, json!({ "token": token })).await;
    assert_eq!((s, v["data"]["verified"].clone()), (StatusCode::OK, json!(true)), "{v}");

    // An unknown address gets the same answer and no mail.
    let (s, unknown) = app.post("/api/auth/send-verification-email", None, json!({ "email": "nobody@example.com" })).await;
    assert_eq!((s, unknown["data"]["sent"].clone()), (StatusCode::OK, json!(true)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(inbox.try_recv().is_err(), "no mail for an unknown address");
}
db_test!(verification_mail_goes_through_smtp_outside_development_mode);

async fn without_a_relay_production_switches_verification_email_off(app: TestApp) {
    let app = app
        .variant(|c| {
            c.dev = false;
            c.quic_listen = "off".into();
        })
        .await;
    let (s, _) = app.post("/api/auth/register", None, json!({ "email": "off@example.com", "password": "correct horse battery", "display_name": "O" })).await;
    assert_eq!(s, StatusCode::CREATED);
    // Known and unknown addresses alike: nothing is issued, nothing logged.
    for email in ["off@example.com", "nobody@example.com"] {
        let body = assert_error(app.post("/api/auth/send-verification-email", None, json!({ "email": email })).await, 503, "ServiceUnavailable");
        assert_eq!(body["details"], json!(["verification email is not configured on this hub"]));
    }
    // The rest of the bootstrap works.
    let (s, _) = app.post("/api/auth/login", None, json!({ "email": "off@example.com", "password": "correct horse battery" })).await;
    assert_eq!(s, StatusCode::OK);
}
db_test!(without_a_relay_production_switches_verification_email_off);

async fn password_reset_mail_goes_through_smtp_and_its_token_sets_the_password(app: TestApp) {
    let (port, mut inbox) = fake_relay().await;
    let app = app
        .variant(move |c| {
            c.dev = false;
            c.quic_listen = "off".into();
            c.smtp_url = Some(format!("smtp://127.0.0.1:{port}"));
            c.mail_from = Some("hub@example.com".into());
        })
        .await;
    let (s, _) = app.post("/api/auth/register", None, json!({ "email": "forgot@example.com", "password": "old password", "display_name": "F" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, sent) = app.post("/api/auth/password-reset", None, json!({ "email": "Forgot@example.com" })).await;
    assert_eq!(s, StatusCode::OK, "{sent}");
    assert!(sent["data"].get("dev_token").is_none(), "outside development mode the token is only mailed: {sent}");
    let mail = tokio::time::timeout(Duration::from_secs(10), inbox.recv()).await.expect("a message within 10 s").unwrap();
    assert_eq!(mail.to, vec!["<forgot@example.com>".to_string()]);
    assert!(mail.data.contains("Subject: Reset your password"), "{}", mail.data);
    assert!(mail.data.contains(sent["data"]["expires_at"].as_str().unwrap()), "{}", mail.data);
    let token = token_in(&mail.data);
    let (s, done) = app.post("/api/auth/password-reset/confirm", None, json!({ "token": token, "new_password": "new password" })).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    let (s, _) = app.post("/api/auth/login", None, json!({ "email": "forgot@example.com", "password": "new password" })).await;
    assert_eq!(s, StatusCode::OK);
    // An unknown address gets the same answer and no mail.
    let (s, unknown) = app.post("/api/auth/password-reset", None, json!({ "email": "nobody@example.com" })).await;
    assert_eq!((s, unknown["data"]["sent"].clone()), (StatusCode::OK, json!(true)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(inbox.try_recv().is_err(), "no mail for an unknown address");

    // Without a relay, no reset is issued either.
    let off = app
        .variant(|c| {
            c.dev = false;
            c.quic_listen = "off".into();
        })
        .await;
    assert_error(off.post("/api/auth/password-reset", None, json!({ "email": "forgot@example.com" })).await, 503, "ServiceUnavailable");
}
db_test!(password_reset_mail_goes_through_smtp_and_its_token_sets_the_password);
