//! sdk-conversation: the compose check decides per channel from the
//! subject's consent for the purpose, the tenant's suppression list and
//! its quiet hours, giving one reason per rule in that order.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn compose(app: &TestApp, token: &str, body: Value) -> Value {
    let (s, r) = app.post("/api/conversations/compose-check", Some(token), body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    r["data"].clone()
}

fn decisions(r: &Value) -> Vec<(String, String)> {
    r["channels"].as_array().unwrap().iter().map(|c| (c["channel"].as_str().unwrap().to_string(), c["decision"].as_str().unwrap().to_string())).collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

async fn compose_checks_weigh_consent_suppression_and_quiet_hours(app: TestApp) {
    let t = app.two_tenants("compose").await;
    let a = t.a_token.as_str();
    for (purpose, basis) in [("marketing", "consent"), ("service", "contract")] {
        let (s, r) = app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": purpose, "description": "x", "legal_basis": basis })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    let noon = "2026-06-01T12:00:00Z";
    let addresses = json!({ "email": "Ann@Example.com", "sms": "+31612345678" });

    // No consent recorded: denied on every channel, the consent reason first.
    let r =
        compose(&app, a, json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["email", "sms"], "addresses": addresses, "send_at": noon })).await;
    assert_eq!(decisions(&r), pairs(&[("email", "deny"), ("sms", "deny")]));
    assert_eq!(
        r["channels"][0]["reasons"],
        json!(["no consent to marketing recorded for the subject", "the email address is not suppressed", "no quiet hours cover email"])
    );
    assert_eq!(r["send_at"], "2026-06-01T12:00:00.000000Z");

    // Granted: allowed where an address is given and not suppressed; no address is a review.
    let (s, _) = app.post("/api/consent/grants", Some(a), json!({ "subject": "ann", "purpose_id": "marketing" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let r =
        compose(&app, a, json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["sms", "email", "push"], "addresses": addresses, "send_at": noon }))
            .await;
    assert_eq!(decisions(&r), pairs(&[("sms", "allow"), ("email", "allow"), ("push", "review")]));
    assert!(r["channels"][0]["reasons"][0].as_str().unwrap().starts_with("consent to marketing granted at "), "{r}");
    assert_eq!(r["channels"][2]["reasons"][1], "no push address given: the suppression list was not consulted");

    // The email address suppressed (matched without regard to case): denied there only.
    let (s, sup) =
        app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "email", "address": "ANN@example.com ", "reason": "hard bounce" })).await;
    assert_eq!((s, sup["data"]["address"].as_str()), (StatusCode::CREATED, Some("ann@example.com")), "{sup}");
    let b =
        assert_error(app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "email", "address": "ann@example.com" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the address is suppressed on email already"]));
    let b = assert_error(app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "fax" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["channel must be one of: email, sms, whatsapp, push, voice", "address is required"]));
    let (_, l) = app.get("/api/conversations/suppressions?channel=email&address=Ann@Example.com", Some(a)).await;
    assert_eq!(l["total"], 1, "{l}");
    let (_, l) = app.get("/api/conversations/suppressions", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0, "B's list is its own");
    let r =
        compose(&app, a, json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["email", "sms"], "addresses": addresses, "send_at": noon })).await;
    assert_eq!(decisions(&r), pairs(&[("email", "deny"), ("sms", "allow")]));
    assert!(r["channels"][0]["reasons"][1].as_str().unwrap().ends_with(": hard bounce"), "{r}");
    // Another tenant's list is not A's.
    let (s, _) = app.post("/api/consent/purposes", Some(&t.b_token), json!({ "purpose_id": "marketing", "description": "x", "legal_basis": "contract" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let r =
        compose(&app, &t.b_token, json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["email"], "addresses": addresses, "send_at": noon })).await;
    assert_eq!(decisions(&r), pairs(&[("email", "allow")]));

    // Quiet hours 21:00-08:00 Amsterdam (UTC+2 in June) on sms: 20:30Z is 22:30 local.
    let (s, q) = app
        .call(
            reqwest::Method::PUT,
            "/api/conversations/quiet-hours",
            Some(a),
            Some(json!({ "timezone": "Europe/Amsterdam", "starts": "21:00", "ends": "08:00", "channels": ["sms"] })),
        )
        .await;
    assert_eq!((s, q["data"]["channels"].clone()), (StatusCode::OK, json!(["sms"])), "{q}");
    let (s, g) = app.get("/api/conversations/quiet-hours", Some(a)).await;
    assert_eq!((s, g["data"]["starts"].as_str()), (StatusCode::OK, Some("21:00")));
    assert_error(app.get("/api/conversations/quiet-hours", Some(&t.b_token)).await, 404, "NotFound");
    let late = json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["sms", "email"], "addresses": { "sms": "+31612345678" }, "send_at": "2026-06-01T20:30:00Z" });
    let r = compose(&app, a, late).await;
    assert_eq!(decisions(&r), pairs(&[("sms", "review"), ("email", "review")]));
    assert_eq!(r["channels"][0]["reasons"][2], "22:30 Europe/Amsterdam is within the quiet hours 21:00-08:00 for sms");
    assert_eq!(r["channels"][1]["reasons"][2], "no quiet hours cover email");
    let r = compose(
        &app,
        a,
        json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["sms"], "addresses": addresses, "send_at": "2026-06-01T06:00:00Z" }),
    )
    .await;
    assert_eq!(r["channels"][0]["reasons"][2], "08:00 Europe/Amsterdam is outside the quiet hours 21:00-08:00");
    assert_eq!(decisions(&r), pairs(&[("sms", "allow")]));
    let b = assert_error(
        app.call(
            reqwest::Method::PUT,
            "/api/conversations/quiet-hours",
            Some(a),
            Some(json!({ "timezone": "Mars/Olympus", "starts": "25:00", "ends": "8", "channels": ["fax"] })),
        )
        .await,
        400,
        "ValidationError",
    );
    // The body's schema first (a channel that is none), then what it cannot say.
    assert_eq!(b["details"], json!(["channels[0] must be one of: email, sms, whatsapp, push, voice"]));
    let b = assert_error(
        app.call(reqwest::Method::PUT, "/api/conversations/quiet-hours", Some(a), Some(json!({ "starts": " ", "ends": 8, "channels": [] }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["timezone is required", "starts is required", "ends must be a string", "channels must hold at least 1 items"]));
    let b = assert_error(
        app.call(
            reqwest::Method::PUT,
            "/api/conversations/quiet-hours",
            Some(a),
            Some(json!({ "timezone": "Mars/Olympus", "starts": "25:00", "ends": "8", "channels": ["sms"] })),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["timezone must be an IANA time zone (Europe/Amsterdam, ...)", "starts must be a time HH:MM", "ends must be a time HH:MM"]));
    let b = assert_error(
        app.call(reqwest::Method::PUT, "/api/conversations/quiet-hours", Some(a), Some(json!({ "timezone": "UTC", "starts": "08:00", "ends": "08:00" }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["ends must differ from starts"]));

    // Withdrawn: denied. A contract purpose needs no consent, but a withdrawal there is a review.
    let (s, _) = app.post("/api/consent/grants", Some(a), json!({ "subject": "ann", "purpose_id": "marketing", "action": "withdrawn" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let r = compose(&app, a, json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["sms"], "addresses": addresses, "send_at": noon })).await;
    assert_eq!(decisions(&r), pairs(&[("sms", "deny")]));
    assert!(r["channels"][0]["reasons"][0].as_str().unwrap().starts_with("consent to marketing withdrawn at "), "{r}");
    let r = compose(&app, a, json!({ "subject": "bob", "purpose_id": "service", "channels": ["sms"], "addresses": addresses, "send_at": noon })).await;
    assert_eq!((decisions(&r), r["channels"][0]["reasons"][0].clone()), (pairs(&[("sms", "allow")]), json!("service rests on contract: no consent needed")));
    let (s, _) = app.post("/api/consent/grants", Some(a), json!({ "subject": "bob", "purpose_id": "service", "action": "withdrawn" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let r = compose(&app, a, json!({ "subject": "bob", "purpose_id": "service", "channels": ["sms"], "addresses": addresses, "send_at": noon })).await;
    assert_eq!(decisions(&r), pairs(&[("sms", "review")]));

    let b = assert_error(
        app.post("/api/conversations/compose-check", Some(a), json!({ "channels": ["sms", "fax"], "addresses": { "fax": 1 }, "send_at": "later" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "subject is required",
            "purpose_id is required",
            "channels[1] must be one of: email, sms, whatsapp, push, voice",
            "addresses.fax must be a string",
            "send_at must be an RFC 3339 timestamp"
        ])
    );
    let b = assert_error(
        app.post("/api/conversations/compose-check", Some(a), json!({ "subject": "ann", "purpose_id": "marketing", "channels": [] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["channels must hold 1 to 5 items"]));
    // Matching its schema, the body still names each channel once, and addresses only channels.
    let b = assert_error(
        app.post(
            "/api/conversations/compose-check",
            Some(a),
            json!({ "subject": "ann", "purpose_id": "marketing", "channels": ["sms", "sms"], "addresses": { "fax": "1" } }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["channels must be distinct", "addresses must map channels to address strings: its keys are among email, sms, whatsapp, push, voice"])
    );
    let b = assert_error(
        app.post("/api/conversations/compose-check", Some(a), json!({ "subject": "ann", "purpose_id": "nope", "channels": ["sms"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["purpose_id is not a purpose of this tenant's catalogue"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("deliverability.address.suppressed.v1"), count("notification.quiet_hours.set.v1")), (1, 1));
}
db_test!(compose_checks_weigh_consent_suppression_and_quiet_hours);

async fn suppressions_are_lifted_and_quiet_hours_cleared(app: TestApp) {
    let t = app.two_tenants("compose-lift").await;
    let a = t.a_token.as_str();
    let (s, r) = app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": "service", "description": "x", "legal_basis": "contract" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let check = json!({ "subject": "cy", "purpose_id": "service", "channels": ["email", "sms"],
        "addresses": { "email": "cy@example.com", "sms": "+31600000001" }, "send_at": "2026-06-01T23:30:00Z" });

    let (s, sup) =
        app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "email", "address": "Cy@Example.com", "reason": "bounce by mistake" })).await;
    assert_eq!(s, StatusCode::CREATED, "{sup}");
    let id = sup["data"]["suppression_id"].as_str().unwrap().to_string();
    let (s, _) =
        app.call(reqwest::Method::PUT, "/api/conversations/quiet-hours", Some(a), Some(json!({ "timezone": "UTC", "starts": "22:00", "ends": "07:00" }))).await;
    assert_eq!(s, StatusCode::OK);
    let r = compose(&app, a, check.clone()).await;
    assert_eq!(decisions(&r), pairs(&[("email", "deny"), ("sms", "review")]));

    // Lifted: the address may be written to again; the row is gone.
    let url = format!("/api/conversations/suppressions/{id}");
    assert_error(app.call(reqwest::Method::DELETE, &url, Some(&t.b_token), None).await, 404, "NotFound");
    let (s, d) = app.call(reqwest::Method::DELETE, &url, Some(a), None).await;
    assert_eq!((s, &d["data"]), (StatusCode::OK, &json!({ "suppression_id": id, "deleted": true })), "{d}");
    assert_error(app.call(reqwest::Method::DELETE, &url, Some(a), None).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::DELETE, "/api/conversations/suppressions/x", Some(a), None).await, 404, "NotFound");
    let (_, l) = app.get("/api/conversations/suppressions", Some(a)).await;
    assert_eq!(l["total"], 0);
    let r = compose(&app, a, check.clone()).await;
    assert_eq!(decisions(&r), pairs(&[("email", "allow"), ("sms", "review")]));
    assert_eq!(r["channels"][0]["reasons"][1], "the email address is not suppressed");
    // Suppressed again, as new.
    let (s, again) = app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "email", "address": "cy@example.com" })).await;
    assert_eq!(s, StatusCode::CREATED, "{again}");
    assert_ne!(again["data"]["suppression_id"].as_str(), Some(id.as_str()));

    // Quiet hours cleared: no channel is quiet.
    assert_error(app.call(reqwest::Method::DELETE, "/api/conversations/quiet-hours", Some(&t.b_token), None).await, 404, "NotFound");
    let (s, d) = app.call(reqwest::Method::DELETE, "/api/conversations/quiet-hours", Some(a), None).await;
    assert_eq!((s, &d["data"]), (StatusCode::OK, &json!({ "deleted": true })), "{d}");
    assert_error(app.get("/api/conversations/quiet-hours", Some(a)).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::DELETE, "/api/conversations/quiet-hours", Some(a), None).await, 404, "NotFound");
    let r = compose(&app, a, check).await;
    assert_eq!(decisions(&r), pairs(&[("email", "deny"), ("sms", "allow")]));
    assert_eq!(r["channels"][1]["reasons"][2], "no quiet hours cover sms");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!(
        [
            count("deliverability.address.suppressed.v1"),
            count("deliverability.address.unsuppressed.v1"),
            count("notification.quiet_hours.set.v1"),
            count("notification.quiet_hours.cleared.v1")
        ],
        [2, 1, 1, 1]
    );
}
db_test!(suppressions_are_lifted_and_quiet_hours_cleared);
