//! sdk-payment: stored methods (a provider token, never a card number) and
//! charges decided by the sandbox provider's test tokens, once per
//! idempotency key.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// Stores a method of `token` and answers its id.
pub async fn method(app: &TestApp, token: &str, card: &str) -> String {
    let body = json!({ "token": card, "brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2099, "label": "office card" });
    let (s, m) = app.post("/api/payments/methods", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    m["data"]["payment_method_id"].as_str().unwrap().to_string()
}

fn charge_body(method: &str, key: &str) -> Value {
    json!({ "amount": 1250, "currency": "EUR", "payment_method_id": method, "description": "May usage", "idempotency_key": key })
}

async fn each_sandbox_token_captures_or_declines_with_its_code(app: TestApp) {
    let t = app.two_tenants("pay-tokens").await;
    let a = t.a_token.as_str();
    let cases = [
        ("tok_visa", StatusCode::CREATED, "captured", None),
        ("tok_mastercard", StatusCode::CREATED, "captured", None),
        ("tok_amex", StatusCode::CREATED, "captured", None),
        ("tok_chargeDeclined", StatusCode::OK, "declined", Some("card_declined")),
        ("tok_insufficientFunds", StatusCode::OK, "declined", Some("insufficient_funds")),
        ("tok_expiredCard", StatusCode::OK, "declined", Some("expired_card")),
        ("tok_processingError", StatusCode::OK, "declined", Some("processing_error")),
    ];
    for (card, status, outcome, code) in cases {
        let m = method(&app, a, card).await;
        let (s, c) = app.post("/api/payments/charges", Some(a), charge_body(&m, card)).await;
        assert_eq!(s, status, "{card}: {c}");
        let c = &c["data"];
        assert_eq!((c["status"].as_str(), c["decline_code"].as_str()), (Some(outcome), code), "{card}");
        assert_eq!((c["amount"].as_i64(), c["currency"].as_str(), c["payment_method_id"].as_str()), (Some(1250), Some("EUR"), Some(m.as_str())));
        assert_eq!((c["provider"].as_str(), c["description"].as_str()), (Some("sandbox"), Some("May usage")));
        assert!(c["provider_reference"].as_str().unwrap().starts_with("sbx_"), "{c}");
        let (s, got) = app.get(&format!("/api/payments/charges/{}", c["charge_id"].as_str().unwrap()), Some(a)).await;
        assert_eq!((s, &got["data"]), (StatusCode::OK, c));
    }
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("payment.method.stored.v1"), count("payment.charge.captured.v1"), count("payment.charge.failed.v1")), (7, 3, 4));
}
db_test!(each_sandbox_token_captures_or_declines_with_its_code);

async fn a_repeated_idempotency_key_answers_the_first_charge(app: TestApp) {
    let t = app.two_tenants("pay-repeat").await;
    let a = t.a_token.as_str();
    let m = method(&app, a, "tok_visa").await;
    let (s, first) = app.post("/api/payments/charges", Some(a), charge_body(&m, "order-1")).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    let (s, again) = app.post("/api/payments/charges", Some(a), charge_body(&m, "order-1")).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &first["data"]));
    let mut other = charge_body(&m, "order-1");
    other["amount"] = json!(99);
    let b = assert_error(app.post("/api/payments/charges", Some(a), other).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["idempotency_key was used for another charge (method, amount or currency differ)"]));
    let declined = method(&app, a, "tok_chargeDeclined").await;
    let (s, d) = app.post("/api/payments/charges", Some(a), charge_body(&declined, "order-2")).await;
    let (s2, d2) = app.post("/api/payments/charges", Some(a), charge_body(&declined, "order-2")).await;
    assert_eq!((s, s2, &d2["data"]), (StatusCode::OK, StatusCode::OK, &d["data"]));
    // B's key of the same name is B's own.
    let mb = method(&app, &t.b_token, "tok_visa").await;
    let (s, theirs) = app.post("/api/payments/charges", Some(&t.b_token), charge_body(&mb, "order-1")).await;
    assert_eq!(s, StatusCode::CREATED, "{theirs}");
    assert_ne!(theirs["data"]["charge_id"], first["data"]["charge_id"]);
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("payment.charge.captured.v1"), count("payment.charge.failed.v1")), (1, 1));
}
db_test!(a_repeated_idempotency_key_answers_the_first_charge);

async fn a_card_number_is_refused_and_every_problem_reported(app: TestApp) {
    let t = app.two_tenants("pay-pan").await;
    let a = t.a_token.as_str();
    let pan = json!({ "token": "4242 4242 4242 4242", "brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2099 });
    let b = assert_error(app.post("/api/payments/methods", Some(a), pan).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["a card number is never stored: send the provider's token"]));
    let in_label = json!({ "token": "tok_visa", "brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2099, "label": "card 5555-5555-5555-4444" });
    let b = assert_error(app.post("/api/payments/methods", Some(a), in_label).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["a card number is never stored: send the provider's token"]));
    let bad = json!({ "token": "tok_unknown", "brand": "visa-ish", "last4": "42", "exp_month": 13, "exp_year": 2000 });
    let b = assert_error(app.post("/api/payments/methods", Some(a), bad).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["brand must be one of: visa, mastercard, amex, discover, jcb, diners, unionpay", "exp_month must be an integer from 1 to 12"])
    );
    let bad = json!({ "token": "tok_unknown", "brand": "visa", "last4": "42", "exp_month": 12, "exp_year": 2099 });
    let b = assert_error(app.post("/api/payments/methods", Some(a), bad).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "token is not a token of the sandbox provider (one of: tok_visa, tok_mastercard, tok_amex, tok_chargeDeclined, tok_insufficientFunds, tok_expiredCard, tok_processingError)",
            "last4 must be four digits",
        ])
    );
    let expired = json!({ "token": "tok_visa", "brand": "visa", "last4": "4242", "exp_month": 1, "exp_year": 2001 });
    let b = assert_error(app.post("/api/payments/methods", Some(a), expired).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["the card expired in 01/2001"]));
    let b = assert_error(app.post("/api/payments/methods", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["token is required", "brand is required", "last4 is required", "exp_month is required", "exp_year is required"]));
    let m = method(&app, a, "tok_visa").await;
    let bad = json!({ "amount": 0, "currency": "eur", "payment_method_id": "nope", "description": "4000056655665556" });
    let b = assert_error(app.post("/api/payments/charges", Some(a), bad).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["amount must be an integer from 1 to 1000000000000", "payment_method_id must be a UUID", "idempotency_key is required"]));
    let bad = json!({ "amount": 1, "currency": "eur", "payment_method_id": m, "description": "4000056655665556", "idempotency_key": "k-bad" });
    let b = assert_error(app.post("/api/payments/charges", Some(a), bad).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["currency must be an ISO 4217 code (three capital letters)", "a card number is never stored: description holds one"]));
    let b = assert_error(app.post("/api/payments/charges", Some(a), json!({ "amount": 1.5, "payment_method_id": m })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["amount must be an integer from 1 to 1000000000000", "currency is required", "idempotency_key is required"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| e.starts_with("payment.")).count(), 1, "only the stored method: {events:?}");
}
db_test!(a_card_number_is_refused_and_every_problem_reported);

async fn another_tenants_method_and_charge_are_not_the_callers(app: TestApp) {
    let t = app.two_tenants("pay-tenants").await;
    let a = t.a_token.as_str();
    let mine = method(&app, a, "tok_visa").await;
    let theirs = method(&app, &t.b_token, "tok_visa").await;
    let b = assert_error(app.post("/api/payments/charges", Some(a), charge_body(&theirs, "k1")).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["payment_method_id is not a payment method of the tenant"]));
    let mut foreign = charge_body(&mine, "k2");
    foreign["tenant_id"] = t.b["tenant_id"].clone();
    assert_error(app.post("/api/payments/charges", Some(a), foreign).await, 403, "TenantMismatch");
    let (s, c) = app.post("/api/payments/charges", Some(a), charge_body(&mine, "k3")).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let charge = c["data"]["charge_id"].as_str().unwrap();
    assert_error(app.get(&format!("/api/payments/charges/{charge}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/payments/charges/not-a-uuid", Some(a)).await, 404, "NotFound");
    let stored: String =
        sqlx::query_scalar("SELECT tenant_id FROM payment_charge WHERE charge_id = $1").bind(charge).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(stored, t.a["tenant_id"].as_str().unwrap());
}
db_test!(another_tenants_method_and_charge_are_not_the_callers);

async fn methods_are_listed_read_and_detached_and_charges_listed(app: TestApp) {
    let t = app.two_tenants("pay-life").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let visa = method(&app, a, "tok_visa").await;
    let body = json!({ "token": "tok_amex", "brand": "amex", "last4": "0005", "exp_month": 1, "exp_year": 2099 });
    let (_, amex) = app.post("/api/payments/methods", Some(a), body).await;
    let amex = amex["data"]["payment_method_id"].as_str().unwrap().to_string();
    let declined = method(&app, a, "tok_chargeDeclined").await;
    method(&app, b, "tok_visa").await;

    // Methods: newest first, display facts only, `brand` filters.
    let (s, l) = app.get("/api/payments/methods", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().map(|m| m["payment_method_id"].as_str().unwrap()).collect();
    assert_eq!((l["total"].as_i64(), ids), (Some(3), vec![declined.as_str(), amex.as_str(), visa.as_str()]));
    assert!(l["data"].as_array().unwrap().iter().all(|m| m.get("token").is_none()), "never the token: {l}");
    let (_, l) = app.get("/api/payments/methods?brand=amex", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["last4"].as_str()), (Some(1), Some("0005")));
    assert_error(app.get("/api/payments/methods?brand=bitcoin", Some(a)).await, 400, "ValidationError");
    let (s, m) = app.get(&format!("/api/payments/methods/{visa}"), Some(a)).await;
    assert_eq!((s, m["data"]["label"].as_str(), m["data"]["brand"].as_str()), (StatusCode::OK, Some("office card"), Some("visa")));
    assert_error(app.get(&format!("/api/payments/methods/{visa}"), Some(b)).await, 404, "NotFound");

    // Charges: newest first, by status, method and time.
    let charge = |m: &str, key: &str| app.post("/api/payments/charges", Some(a), charge_body(m, key));
    let (_, c1) = charge(&visa, "c1").await;
    let (_, c2) = charge(&declined, "c2").await;
    let (_, c3) = charge(&amex, "c3").await;
    let (s, l) = app.get("/api/payments/charges", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!(l, json!({ "success": true, "data": [c3["data"], c2["data"], c1["data"]], "total": 3 }));
    let (_, l) = app.get("/api/payments/charges?status=declined", Some(a)).await;
    assert_eq!((l["total"].as_i64(), &l["data"][0]), (Some(1), &c2["data"]));
    let (_, l) = app.get(&format!("/api/payments/charges?status=captured&payment_method_id={amex}"), Some(a)).await;
    assert_eq!((l["total"].as_i64(), &l["data"][0]), (Some(1), &c3["data"]));
    let at = c2["data"]["created_at"].as_str().unwrap();
    let (_, l) = app.get(&format!("/api/payments/charges?from={at}"), Some(a)).await;
    assert_eq!(l["total"], 2, "from is inclusive: {l}");
    let (_, l) = app.get(&format!("/api/payments/charges?to={at}"), Some(a)).await;
    assert_eq!((l["total"].as_i64(), &l["data"][0]), (Some(1), &c1["data"]), "to is exclusive");
    let (_, l) = app.get("/api/payments/charges", Some(b)).await;
    assert_eq!(l["total"], 0);
    let bad = assert_error(app.get("/api/payments/charges?status=lost&payment_method_id=nope", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"].as_array().unwrap().len(), 2, "{bad}");
    let bad = assert_error(app.get("/api/payments/charges?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["from must be before to"]));

    // Detaching: once (then 404), no charge can use it, its charges stay.
    assert_error(app.call(Method::DELETE, &format!("/api/payments/methods/{visa}"), Some(b), None).await, 404, "NotFound");
    let (s, d) = app.call(Method::DELETE, &format!("/api/payments/methods/{visa}"), Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!((d["data"]["payment_method_id"].as_str(), d["data"]["detached"].as_bool()), (Some(visa.as_str()), Some(true)));
    assert!(d["data"]["detached_at"].is_string());
    assert_error(app.call(Method::DELETE, &format!("/api/payments/methods/{visa}"), Some(a), None).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/payments/methods/{visa}"), Some(a)).await, 404, "NotFound");
    let (_, l) = app.get("/api/payments/methods", Some(a)).await;
    assert_eq!(l["total"], 2);
    let b400 = assert_error(charge(&visa, "c4").await, 400, "ValidationError");
    assert_eq!(b400["details"], json!(["payment_method_id is not a payment method of the tenant"]));
    let (s, again) = charge(&visa, "c1").await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &c1["data"]), "a repeated key still answers its first charge");
    let (_, c) = app.get(&format!("/api/payments/charges/{}", c1["data"]["charge_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!(c["data"]["payment_method_id"].as_str(), Some(visa.as_str()));
    let token: String = sqlx::query_scalar("SELECT token FROM payment_method WHERE method_id = $1").bind(&visa).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(token, "", "the provider's token is erased");

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "payment.method.detached.v1").count(), 1, "{events:?}");
}
db_test!(methods_are_listed_read_and_detached_and_charges_listed);
