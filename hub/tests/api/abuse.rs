//! Abuse resistance of the routes that take a secret without a credential:
//! password guessing is slowed per account and per client address (429
//! with `Retry-After`, counted in the database), never locked for good.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// A client whose connections come from another loopback address.
fn client_from(addr: &str) -> reqwest::Client {
    reqwest::Client::builder().local_address(Some(addr.parse().unwrap())).build().unwrap()
}

async fn post_from(app: &TestApp, client: &reqwest::Client, path: &str, body: Value) -> (StatusCode, Value, Option<String>) {
    let res = client.post(format!("{}{path}", app.base)).json(&body).send().await.unwrap();
    let status = res.status();
    let retry = res.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
    (status, res.json().await.unwrap(), retry)
}

fn login(email: &str, password: &str) -> Value {
    json!({ "email": email, "password": password })
}

async fn wrong_passwords_slow_an_account_down_then_let_it_in(app: TestApp) {
    app.signup("guess@example.com", "guess").await;
    let c = reqwest::Client::new();
    // Five wrong passwords are free; the sixth starts a one-second block.
    for i in 1..=6 {
        let (s, b, _) = post_from(&app, &c, "/api/auth/login", login("guess@example.com", "wrong password")).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "attempt {i}: {b}");
    }
    let (s, b, retry) = post_from(&app, &c, "/api/auth/login", login("guess@example.com", "wrong password")).await;
    assert_error((s, b), 429, "RateLimited");
    assert_eq!(retry.as_deref(), Some("1"));
    // While blocked even the right password waits (a guess cannot be told
    // from the owner), and from any address: the count is the account's.
    let (s, b, _) = post_from(&app, &client_from("127.0.0.3"), "/api/auth/login", login("guess@example.com", "correct horse battery")).await;
    assert_error((s, b), 429, "RateLimited");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (s, b, _) = post_from(&app, &c, "/api/auth/login", login("guess@example.com", "correct horse battery")).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // A correct password forgets the account's failures.
    for i in 1..=5 {
        let (s, b, _) = post_from(&app, &c, "/api/auth/login", login("guess@example.com", "wrong password")).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "attempt {i} after success: {b}");
    }
}
db_test!(wrong_passwords_slow_an_account_down_then_let_it_in);

async fn one_address_guessing_many_accounts_is_slowed_but_others_are_not(app: TestApp) {
    app.signup("real@example.com", "real").await;
    let attacker = client_from("127.0.0.2");
    // Twenty failures are free for an address (each on a fresh account, so
    // no account throttle applies); the twenty-first starts a block.
    for i in 1..=21 {
        let (s, b, _) = post_from(&app, &attacker, "/api/auth/login", login(&format!("nobody{i}@example.com"), "guess guess")).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "attempt {i}: {b}");
    }
    let (s, b, retry) = post_from(&app, &attacker, "/api/auth/login", login("nobody99@example.com", "guess guess")).await;
    assert_error((s, b), 429, "RateLimited");
    assert!(retry.is_some());
    // The real user, at another address, is not affected.
    let (s, b, _) = post_from(&app, &client_from("127.0.0.4"), "/api/auth/login", login("real@example.com", "correct horse battery")).await;
    assert_eq!(s, StatusCode::OK, "{b}");
}
db_test!(one_address_guessing_many_accounts_is_slowed_but_others_are_not);

async fn guessing_client_secrets_is_slowed_per_address(app: TestApp) {
    let t = app.signup("sec@example.com", "sec").await;
    let (_, key) = app.key(t["token"].as_str().unwrap(), "sec", json!(["*"])).await;
    let attacker = client_from("127.0.0.2");
    for i in 1..=21 {
        let (s, b, _) =
            post_from(&app, &attacker, "/api/auth/token", json!({ "grant_type": "client_credentials", "client_secret": format!("pk_live_guess{i}") })).await;
        assert_error((s, b), 401, "invalid_client");
    }
    let (s, b, _) = post_from(&app, &attacker, "/api/auth/token", json!({ "grant_type": "client_credentials", "client_secret": key["api_key"] })).await;
    assert_error((s, b), 429, "RateLimited");
    // The key's own client, elsewhere, exchanges as before.
    let (s, b, _) =
        post_from(&app, &reqwest::Client::new(), "/api/auth/token", json!({ "grant_type": "client_credentials", "client_secret": key["api_key"] })).await;
    assert_eq!(s, StatusCode::OK, "{b}");
}
db_test!(guessing_client_secrets_is_slowed_per_address);

async fn verification_emails_to_one_account_are_slowed(app: TestApp) {
    app.signup("mail@example.com", "mail").await;
    let c = reqwest::Client::new();
    for i in 1..=4 {
        let (s, b, _) = post_from(&app, &c, "/api/auth/send-verification-email", json!({ "email": "mail@example.com" })).await;
        assert_eq!(s, StatusCode::OK, "request {i}: {b}");
    }
    let (s, b, retry) = post_from(&app, &c, "/api/auth/send-verification-email", json!({ "email": "mail@example.com" })).await;
    assert_error((s, b), 429, "RateLimited");
    assert_eq!(retry.as_deref(), Some("1"));
    // Unknown emails count the same, so the throttle reveals no account.
    for _ in 1..=4 {
        let (s, _, _) = post_from(&app, &c, "/api/auth/send-verification-email", json!({ "email": "ghost@example.com" })).await;
        assert_eq!(s, StatusCode::OK);
    }
    let (s, b, _) = post_from(&app, &c, "/api/auth/send-verification-email", json!({ "email": "ghost@example.com" })).await;
    assert_error((s, b), 429, "RateLimited");
}
db_test!(verification_emails_to_one_account_are_slowed);
