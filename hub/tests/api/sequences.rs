//! sdk-sequence: message templates (one name per tenant, a channel that
//! defaults to email) and sequences whose ordered steps name templates of
//! the tenant.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn template(app: &TestApp, token: &str, body: Value) -> (StatusCode, Value) {
    app.post("/api/sequences/templates", Some(token), body).await
}

async fn templates_are_named_once_per_tenant_on_a_known_channel(app: TestApp) {
    let t = app.two_tenants("templates").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (s, e) = template(&app, a, json!({ "tenant_id": tenant, "name": "welcome", "subject": "Hello", "body": "Welcome aboard" })).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    assert_eq!(
        (e["data"]["channel"].as_str(), e["data"]["subject"].as_str(), e["data"]["body"].as_str()),
        (Some("email"), Some("Hello"), Some("Welcome aboard"))
    );
    let (s, sms) = template(&app, a, json!({ "tenant_id": tenant, "name": "nudge", "channel": "sms", "body": "Still there?" })).await;
    assert_eq!((s, sms["data"]["channel"].as_str(), sms["data"]["subject"].clone()), (StatusCode::CREATED, Some("sms"), Value::Null));

    let b = assert_error(template(&app, a, json!({ "tenant_id": tenant, "name": "welcome", "channel": "sms", "body": "x" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the tenant has a template named welcome"]));
    let (s, _) = template(&app, &t.b_token, json!({ "tenant_id": t.b["tenant_id"], "name": "welcome", "body": "B's" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let b = assert_error(template(&app, a, json!({ "channel": "pigeon", "subject": "s" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["tenant_id is required", "name is required", "channel must be one of: email, sms, whatsapp, push, voice", "body is required"])
    );
    let b = assert_error(
        template(&app, a, json!({ "tenant_id": tenant, "name": "n".repeat(201), "subject": "s".repeat(301), "body": "b".repeat(20001) })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name must be at most 200 characters", "subject must be at most 300 characters", "body must be at most 20000 characters"]));
    let b = assert_error(
        template(&app, a, json!({ "tenant_id": tenant, "name": "n", "channel": "push", "subject": "s", "body": "b" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["subject is for the email channel only"]));

    let (s, l) = app.get("/api/sequences/templates", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let names: Vec<&str> = l["data"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!((names, l["total"].as_i64()), (vec!["nudge", "welcome"], Some(2)));
    let (_, l) = app.get("/api/sequences/templates?channel=email&limit=5", Some(a)).await;
    assert_eq!((l["data"][0]["name"].as_str(), l["total"].as_i64()), (Some("welcome"), Some(1)));
    let b = assert_error(app.get("/api/sequences/templates?channel=fax", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["channel must be one of: email, sms, whatsapp, push, voice"]));
    let b = assert_error(app.get("/api/sequences/templates?offset=x", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["offset must be an integer"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "sequence.template.created.v1").count(), 2);
}
db_test!(templates_are_named_once_per_tenant_on_a_known_channel);

async fn sequences_order_steps_over_the_tenants_own_templates(app: TestApp) {
    let t = app.two_tenants("sequences").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (_, first) = template(&app, a, json!({ "tenant_id": tenant, "name": "first", "body": "1" })).await;
    let (_, second) = template(&app, a, json!({ "tenant_id": tenant, "name": "second", "channel": "sms", "body": "2" })).await;
    let (_, foreign) = template(&app, &t.b_token, json!({ "tenant_id": t.b["tenant_id"], "name": "b", "body": "b" })).await;
    let (first, second, foreign) = (&first["data"]["template_id"], &second["data"]["template_id"], &foreign["data"]["template_id"]);

    let steps = json!([{ "template_id": first }, { "template_id": second, "delay_seconds": 86400 }, { "template_id": first, "delay_seconds": 0 }]);
    let (s, q) = app.post("/api/sequences", Some(a), json!({ "name": "onboarding", "steps": steps })).await;
    assert_eq!(s, StatusCode::CREATED, "{q}");
    assert_eq!(
        q["data"]["steps"],
        json!([
            { "position": 1, "template_id": first, "delay_seconds": 0 },
            { "position": 2, "template_id": second, "delay_seconds": 86400 },
            { "position": 3, "template_id": first, "delay_seconds": 0 }
        ])
    );
    let b = assert_error(app.post("/api/sequences", Some(a), json!({ "name": "onboarding", "steps": [{ "template_id": first }] })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the tenant has a sequence named onboarding"]));

    let b = assert_error(
        app.post(
            "/api/sequences",
            Some(a),
            json!({ "name": "x", "steps": [{ "template_id": first }, { "template_id": foreign }, { "template_id": uuid::Uuid::now_v7().to_string() }] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["steps[1].template_id is not a template of this tenant", "steps[2].template_id is not a template of this tenant"]));
    let b = assert_error(
        app.post("/api/sequences", Some(a), json!({ "steps": [{ "template_id": "nope", "delay_seconds": -1 }, 7, { "delay_seconds": 9_000_000 }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "name is required",
            "steps[0].template_id must be a UUID",
            "steps[0].delay_seconds must be an integer from 0 to 7776000",
            "steps[1] must be a JSON object",
            "steps[2].template_id is required",
            "steps[2].delay_seconds must be an integer from 0 to 7776000"
        ])
    );
    let b = assert_error(app.post("/api/sequences", Some(a), json!({ "name": "empty", "steps": [] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["steps must hold 1 to 50 items"]));

    let (_, other) = app.post("/api/sequences", Some(a), json!({ "name": "short", "steps": [{ "template_id": second }] })).await;
    let (s, l) = app.get("/api/sequences?limit=1", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!((l["data"][0]["sequence_id"].clone(), l["total"].as_i64()), (other["data"]["sequence_id"].clone(), Some(2)));
    let (_, l) = app.get("/api/sequences", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0, "B sees none of A's");
    assert_error(app.get(&format!("/api/sequences?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "sequence.sequence.created.v1").count(), 2);
}
db_test!(sequences_order_steps_over_the_tenants_own_templates);

async fn templates_and_sequences_are_read_changed_and_archived(app: TestApp) {
    let t = app.two_tenants("sequence-life").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (_, mail) = template(&app, a, json!({ "tenant_id": tenant, "name": "welcome", "subject": "Helo", "body": "Welcom" })).await;
    let mail = mail["data"]["template_id"].as_str().unwrap().to_string();
    let (_, sms) = template(&app, a, json!({ "tenant_id": tenant, "name": "nudge", "channel": "sms", "body": "Still there?" })).await;
    let sms = sms["data"]["template_id"].as_str().unwrap().to_string();

    // A template: read, its typo fixed in place.
    let url = format!("/api/sequences/templates/{mail}");
    let (s, r) = app.get(&url, Some(a)).await;
    assert_eq!((s, r["data"]["name"].as_str(), r["data"]["subject"].as_str()), (StatusCode::OK, Some("welcome"), Some("Helo")), "{r}");
    assert_error(app.get(&url, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/sequences/templates/nope", Some(a)).await, 404, "NotFound");
    let (s, r) = app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "subject": "Hello" }))).await;
    assert_eq!((s, r["data"]["subject"].as_str(), r["data"]["body"].as_str()), (StatusCode::OK, Some("Hello"), Some("Welcom")), "{r}");
    let (s, r) = app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "body": "Welcome" }))).await;
    assert_eq!(
        (s, r["data"]["subject"].as_str(), r["data"]["body"].as_str(), r["data"]["name"].as_str()),
        (StatusCode::OK, Some("Hello"), Some("Welcome"), Some("welcome"))
    );
    let (_, g) = app.get(&url, Some(a)).await;
    assert_eq!(g["data"], r["data"]);
    let sms_url = format!("/api/sequences/templates/{sms}");
    let b = assert_error(app.call(reqwest::Method::PATCH, &sms_url, Some(a), Some(json!({ "subject": "x" }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["subject is for the email channel only"]));
    let b = assert_error(app.call(reqwest::Method::PATCH, &sms_url, Some(a), Some(json!({ "channel": "email" }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of subject, body"]));
    let b = assert_error(app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "body": "b".repeat(20001) }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["body must be at most 20000 characters"]));
    assert_error(app.call(reqwest::Method::PATCH, &url, Some(&t.b_token), Some(json!({ "body": "mine" }))).await, 404, "NotFound");

    // A sequence: read, renamed, its steps replaced, archived for good.
    let (_, q) = app.post("/api/sequences", Some(a), json!({ "name": "onboarding", "steps": [{ "template_id": mail }] })).await;
    let seq = q["data"]["sequence_id"].as_str().unwrap().to_string();
    assert_eq!(q["data"]["status"].as_str(), Some("active"));
    let (_, other) = app.post("/api/sequences", Some(a), json!({ "name": "winback", "steps": [{ "template_id": sms }] })).await;
    let other = other["data"]["sequence_id"].as_str().unwrap().to_string();
    let url = format!("/api/sequences/{seq}");
    let (s, r) = app.get(&url, Some(a)).await;
    assert_eq!((s, &r["data"]), (StatusCode::OK, &q["data"]), "{r}");
    assert_error(app.get(&url, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/sequences/42", Some(a)).await, 404, "NotFound");
    let patch = |body: Value| app.call(reqwest::Method::PATCH, &url, Some(a), Some(body));
    let (s, r) = patch(json!({ "steps": [{ "template_id": mail }, { "template_id": sms, "delay_seconds": 3600 }] })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["name"].as_str(), &r["data"]["steps"]),
        (
            Some("onboarding"),
            &json!([{ "position": 1, "template_id": mail, "delay_seconds": 0 }, { "position": 2, "template_id": sms, "delay_seconds": 3600 }])
        )
    );
    let (s, r) = patch(json!({ "name": "welcome-flow" })).await;
    assert_eq!((s, r["data"]["name"].as_str(), r["data"]["steps"].as_array().map(Vec::len)), (StatusCode::OK, Some("welcome-flow"), Some(2)));
    let (s, _) = patch(json!({ "name": "welcome-flow" })).await;
    assert_eq!(s, StatusCode::OK, "its own name is no conflict");
    let b = assert_error(patch(json!({ "name": "winback" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the tenant has a sequence named winback"]));
    let b = assert_error(patch(json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, steps"]));
    let b = assert_error(patch(json!({ "steps": [] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["steps must hold 1 to 50 items"]));
    let (_, foreign) = template(&app, &t.b_token, json!({ "tenant_id": t.b["tenant_id"], "name": "b", "body": "b" })).await;
    let b = assert_error(patch(json!({ "steps": [{ "template_id": foreign["data"]["template_id"] }] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["steps[0].template_id is not a template of this tenant"]));
    assert_error(app.call(reqwest::Method::PATCH, &url, Some(&t.b_token), Some(json!({ "name": "mine" }))).await, 404, "NotFound");

    let (s, r) = app.post(&format!("{url}/archive"), Some(a), json!({})).await;
    assert_eq!((s, r["data"]["status"].as_str(), r["data"]["name"].as_str()), (StatusCode::OK, Some("archived"), Some("welcome-flow")), "{r}");
    let b = assert_error(app.post(&format!("{url}/archive"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the sequence is archived: only an active sequence can be archived"]));
    let b = assert_error(patch(json!({ "name": "again" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the sequence is archived: an archived sequence is not changed"]));
    assert_error(app.post(&format!("/api/sequences/{other}/archive"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/sequences/nope/archive", Some(a), json!({})).await, 404, "NotFound");
    let ids = |l: &Value| l["data"].as_array().unwrap().iter().map(|q| q["sequence_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (_, l) = app.get("/api/sequences?status=archived", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![seq.clone()], Some(1)));
    let (_, l) = app.get("/api/sequences?status=active", Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![other.clone()], Some(1)));
    let (_, l) = app.get("/api/sequences", Some(a)).await;
    assert_eq!(l["total"], 2, "an archived sequence is kept");
    let b = assert_error(app.get("/api/sequences?status=gone", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: active, archived"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!([count("sequence.template.updated.v1"), count("sequence.sequence.updated.v1"), count("sequence.sequence.archived.v1")], [2, 3, 1]);
}
db_test!(templates_and_sequences_are_read_changed_and_archived);

/// A contact of the token's tenant.
async fn contact(app: &TestApp, token: &str, body: Value) -> String {
    let (s, c) = app.post("/api/crm/contacts", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    c["data"]["contact_id"].as_str().unwrap().to_string()
}

fn at(v: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("a time: {v}"))).unwrap().with_timezone(&chrono::Utc)
}

async fn contacts_are_enrolled_once_with_each_steps_due_time_and_cancelled(app: TestApp) {
    let t = app.two_tenants("enrol").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (_, mail) = template(&app, a, json!({ "tenant_id": tenant, "name": "welcome", "body": "Welcome" })).await;
    let mail = mail["data"]["template_id"].as_str().unwrap().to_string();
    let (_, sms) = template(&app, a, json!({ "tenant_id": tenant, "name": "nudge", "channel": "sms", "body": "Still there?" })).await;
    let sms = sms["data"]["template_id"].as_str().unwrap().to_string();
    let (_, q) = app
        .post(
            "/api/sequences",
            Some(a),
            json!({ "name": "onboarding", "steps": [{ "template_id": mail, "delay_seconds": 60 }, { "template_id": sms, "delay_seconds": 3600 }] }),
        )
        .await;
    let seq = q["data"]["sequence_id"].as_str().unwrap().to_string();
    let ada = contact(&app, a, json!({ "name": "Ada", "emails": ["ada@example.com"], "phones": ["+14155550123"] })).await;
    let bob = contact(&app, a, json!({ "name": "Bob", "emails": ["bob@example.com"] })).await;
    let url = format!("/api/sequences/{seq}/enrollments");

    let (s, e) = app.post(&url, Some(a), json!({ "contact_id": ada })).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let e = e["data"].clone();
    let enrolled = at(&e["enrolled_at"]);
    assert_eq!((e["sequence_id"].as_str(), e["contact_id"].as_str(), e["status"].as_str()), (Some(seq.as_str()), Some(ada.as_str()), Some("active")));
    assert_eq!(
        (&e["steps"][0]["position"], &e["steps"][0]["template_id"], &e["steps"][0]["channel"], &e["steps"][0]["delay_seconds"]),
        (&json!(1), &json!(mail), &json!("email"), &json!(60))
    );
    assert_eq!((&e["steps"][1]["position"], &e["steps"][1]["channel"], &e["steps"][1]["delay_seconds"]), (&json!(2), &json!("sms"), &json!(3600)));
    assert_eq!(at(&e["steps"][0]["due_at"]) - enrolled, chrono::Duration::seconds(60), "due after the enrolment");
    assert_eq!(at(&e["steps"][1]["due_at"]) - enrolled, chrono::Duration::seconds(3660), "the delays add up");
    assert_eq!((&e["ends_at"], &e["cancelled_at"]), (&e["steps"][1]["due_at"], &Value::Null));

    // Enrolled already: the enrolment it has is the answer, nothing recorded.
    let (s, again) = app.post(&url, Some(a), json!({ "contact_id": ada.to_uppercase() })).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &e), "{again}");
    let (s, bobs) = app.post(&url, Some(a), json!({ "contact_id": bob })).await;
    assert_eq!(s, StatusCode::CREATED, "{bobs}");

    // A later change of the sequence's steps leaves the enrolment's schedule.
    let (s, _) = app.call(reqwest::Method::PATCH, &format!("/api/sequences/{seq}"), Some(a), Some(json!({ "steps": [{ "template_id": sms }] }))).await;
    assert_eq!(s, StatusCode::OK);
    let one = format!("{url}/{}", e["enrollment_id"].as_str().unwrap());
    let (s, got) = app.get(&one, Some(a)).await;
    assert_eq!((s, &got["data"]), (StatusCode::OK, &e), "{got}");

    let ids = |l: &Value| l["data"].as_array().unwrap().iter().map(|e| e["enrollment_id"].clone()).collect::<Vec<_>>();
    let (s, l) = app.get(&url, Some(a)).await;
    assert_eq!((s, ids(&l), l["total"].as_i64()), (StatusCode::OK, vec![bobs["data"]["enrollment_id"].clone(), e["enrollment_id"].clone()], Some(2)));
    let (_, l) = app.get(&format!("{url}?contact_id={ada}"), Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![e["enrollment_id"].clone()], Some(1)));
    let (_, l) = app.get(&format!("{url}?status=active&limit=1&offset=1"), Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![e["enrollment_id"].clone()], Some(2)));
    let (_, l) = app.get(&format!("{url}?status=cancelled"), Some(a)).await;
    assert_eq!(l["total"], 0);
    let b = assert_error(app.get(&format!("{url}?status=paused"), Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: active, completed, cancelled"]));

    // Another tenant's sequence, enrolment or contact is not found.
    assert_error(app.get(&url, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get(&one, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.post(&url, Some(&t.b_token), json!({ "contact_id": ada })).await, 404, "NotFound");
    assert_error(app.post(&format!("{one}/cancel"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/sequences/nope/enrollments", Some(a), json!({ "contact_id": ada })).await, 404, "NotFound");
    let theirs = contact(&app, &t.b_token, json!({ "name": "Cy", "emails": ["cy@example.com"] })).await;
    let b = assert_error(app.post(&url, Some(a), json!({ "contact_id": theirs })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["contact_id is not a contact of this tenant"]));
    let b = assert_error(app.post(&url, Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["contact_id is required"]));

    // Cancelled once; a new enrolment of the contact may follow.
    let (s, c) = app.post(&format!("{one}/cancel"), Some(a), json!({})).await;
    assert_eq!((s, c["data"]["status"].as_str(), &c["data"]["steps"]), (StatusCode::OK, Some("cancelled"), &e["steps"]), "{c}");
    assert!(at(&c["data"]["cancelled_at"]) >= enrolled);
    let b = assert_error(app.post(&format!("{one}/cancel"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the enrollment is cancelled: only an active enrollment can be cancelled"]));
    let (_, l) = app.get(&format!("{url}?status=cancelled"), Some(a)).await;
    assert_eq!((ids(&l), l["total"].as_i64()), (vec![e["enrollment_id"].clone()], Some(1)));
    let (s, anew) = app.post(&url, Some(a), json!({ "contact_id": ada })).await;
    assert_eq!((s, anew["data"]["steps"].as_array().map(Vec::len)), (StatusCode::CREATED, Some(1)), "the steps as they are now: {anew}");
    assert_ne!(anew["data"]["enrollment_id"], e["enrollment_id"]);

    // An archived sequence enrols nobody; its enrolments are still listed.
    let (s, _) = app.post(&format!("/api/sequences/{seq}/archive"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let cy = contact(&app, a, json!({ "name": "Cy", "emails": ["cy@example.com"] })).await;
    let b = assert_error(app.post(&url, Some(a), json!({ "contact_id": cy })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the sequence is archived: an archived sequence enrols nobody"]));
    let (_, l) = app.get(&url, Some(a)).await;
    assert_eq!(l["total"], 3);

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("sequence.enrollment")).collect();
    assert_eq!(
        ours,
        ["sequence.enrollment.started.v1", "sequence.enrollment.started.v1", "sequence.enrollment.cancelled.v1", "sequence.enrollment.started.v1"]
    );
}
db_test!(contacts_are_enrolled_once_with_each_steps_due_time_and_cancelled);

async fn an_enrolment_completes_when_its_last_step_is_due_and_suppressed_contacts_are_refused(app: TestApp) {
    let t = app.two_tenants("enrol-done").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (_, mail) = template(&app, a, json!({ "tenant_id": tenant, "name": "now", "body": "Now" })).await;
    let mail = mail["data"]["template_id"].as_str().unwrap().to_string();
    let (_, q) = app.post("/api/sequences", Some(a), json!({ "name": "at-once", "steps": [{ "template_id": mail }] })).await;
    let url = format!("/api/sequences/{}/enrollments", q["data"]["sequence_id"].as_str().unwrap());
    let ada = contact(&app, a, json!({ "name": "Ada", "emails": ["ada@example.com", "ada@work.example.com"] })).await;

    // Every step due at enrolment: completed at once, and not cancelled.
    let (s, e) = app.post(&url, Some(a), json!({ "contact_id": ada })).await;
    assert_eq!((s, e["data"]["status"].as_str(), &e["data"]["ends_at"]), (StatusCode::CREATED, Some("completed"), &e["data"]["enrolled_at"]), "{e}");
    let one = format!("{url}/{}", e["data"]["enrollment_id"].as_str().unwrap());
    let b = assert_error(app.post(&format!("{one}/cancel"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the enrollment is completed: only an active enrollment can be cancelled"]));
    // A completed enrolment leaves room for a new one.
    let (s, again) = app.post(&url, Some(a), json!({ "contact_id": ada })).await;
    assert_eq!(s, StatusCode::CREATED, "{again}");
    assert_ne!(again["data"]["enrollment_id"], e["data"]["enrollment_id"]);
    let (_, l) = app.get(&format!("{url}?status=completed"), Some(a)).await;
    assert_eq!(l["total"], 2);
    let (_, l) = app.get(&format!("{url}?status=active"), Some(a)).await;
    assert_eq!(l["total"], 0);
    let (s, got) = app.get(&one, Some(a)).await;
    assert_eq!((s, got["data"]["status"].as_str()), (StatusCode::OK, Some("completed")));

    // One of two addresses suppressed: still reachable; both: refused.
    let (s, _) = app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "email", "address": "ADA@example.com", "reason": "bounce" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, q) = app.post("/api/sequences", Some(a), json!({ "name": "later", "steps": [{ "template_id": mail, "delay_seconds": 600 }] })).await;
    let later = format!("/api/sequences/{}/enrollments", q["data"]["sequence_id"].as_str().unwrap());
    let (s, r) = app.post(&later, Some(a), json!({ "contact_id": ada })).await;
    assert_eq!((s, r["data"]["status"].as_str()), (StatusCode::CREATED, Some("active")), "{r}");
    let (s, _) = app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "email", "address": "ada@work.example.com" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, q) = app.post("/api/sequences", Some(a), json!({ "name": "again", "steps": [{ "template_id": mail, "delay_seconds": 600 }] })).await;
    let refused = format!("/api/sequences/{}/enrollments", q["data"]["sequence_id"].as_str().unwrap());
    let b = assert_error(app.post(&refused, Some(a), json!({ "contact_id": ada })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["every email address of the contact is on the suppression list, and a step of the sequence writes on it"]));
    // A suppression on another channel, or a contact with no address on it, refuses nothing.
    let bob = contact(&app, a, json!({ "name": "Bob", "phones": ["+14155550124"] })).await;
    let (s, _) = app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "sms", "address": "+14155550124" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, r) = app.post(&refused, Some(a), json!({ "contact_id": bob })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (_, l) = app.get(&refused, Some(a)).await;
    assert_eq!(l["total"], 1);

    let events = app.events_of(&t.a["tenant_id"]).await;
    let ours: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("sequence.enrollment")).collect();
    assert_eq!(ours, ["sequence.enrollment.started.v1"; 4]);
}
db_test!(an_enrolment_completes_when_its_last_step_is_due_and_suppressed_contacts_are_refused);

/// Erasing a contact cancels its enrolments still running (each with its
/// event), leaves a completed one completed and another contact's alone.
async fn erasing_a_contact_cancels_its_running_enrolments(app: TestApp) {
    let t = app.two_tenants("enrol-erase").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (_, mail) = template(&app, a, json!({ "tenant_id": tenant, "name": "hello", "body": "Hello" })).await;
    let mail = mail["data"]["template_id"].as_str().unwrap().to_string();
    let sequence = async |name: &str, delay: i64| {
        let (s, q) = app.post("/api/sequences", Some(a), json!({ "name": name, "steps": [{ "template_id": mail, "delay_seconds": delay }] })).await;
        assert_eq!(s, StatusCode::CREATED, "{q}");
        format!("/api/sequences/{}/enrollments", q["data"]["sequence_id"].as_str().unwrap())
    };
    let (later, now, other) = (sequence("later", 3600).await, sequence("now", 0).await, sequence("other", 600).await);
    let ada = contact(&app, a, json!({ "name": "Ada", "emails": ["ada@example.com"] })).await;
    let bob = contact(&app, a, json!({ "name": "Bob", "emails": ["bob@example.com"] })).await;
    let enrol = async |url: &str, who: &str| {
        let (s, e) = app.post(url, Some(a), json!({ "contact_id": who })).await;
        assert_eq!(s, StatusCode::CREATED, "{e}");
        format!("{url}/{}", e["data"]["enrollment_id"].as_str().unwrap())
    };
    let (running, done, second, bobs) = (enrol(&later, &ada).await, enrol(&now, &ada).await, enrol(&other, &ada).await, enrol(&later, &bob).await);
    let before = app.events_of(&t.a["tenant_id"]).await.len();

    let (s, erased) = app.call(reqwest::Method::DELETE, &format!("/api/crm/contacts/{ada}"), Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{erased}");
    for one in [&running, &second] {
        let (s, got) = app.get(one, Some(a)).await;
        assert_eq!(
            (s, got["data"]["status"].as_str(), &got["data"]["cancelled_at"]),
            (StatusCode::OK, Some("cancelled"), &erased["data"]["erased_at"]),
            "{got}"
        );
    }
    let (_, got) = app.get(&done, Some(a)).await;
    assert_eq!((got["data"]["status"].as_str(), &got["data"]["cancelled_at"]), (Some("completed"), &Value::Null), "a completed enrolment stays so");
    let (_, got) = app.get(&bobs, Some(a)).await;
    assert_eq!(got["data"]["status"], "active", "another contact's enrolment runs on");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events[before..], ["sequence.enrollment.cancelled.v1", "sequence.enrollment.cancelled.v1", "crm.contact.erased.v1"]);
    // The erased contact is enrolled no more.
    let b = assert_error(app.post(&later, Some(a), json!({ "contact_id": ada })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["contact_id is not a contact of this tenant"]));
}
db_test!(erasing_a_contact_cancels_its_running_enrolments);
