//! sdk-crm: contacts (emails unique in a tenant), leads, calls with their
//! missed-call event, and a contact's timeline, newest first.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn contact(app: &TestApp, token: &str, body: Value) -> Value {
    let (s, c) = app.post("/api/crm/contacts", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    c["data"].clone()
}

async fn contacts_are_created_listed_newest_first_and_kept_to_their_tenant(app: TestApp) {
    let t = app.two_tenants("crm").await;
    let a = t.a_token.as_str();
    let ada = contact(
        &app,
        a,
        json!({
            "name": "Ada Lovelace", "emails": ["Ada@Example.com", "ada@example.com"], "phones": ["+14155550123"], "company": "Engines",
            "owner_persona_id": t.a["persona_id"], "attributes": { "tier": "gold" },
        }),
    )
    .await;
    assert_eq!(ada["emails"], json!(["ada@example.com"]), "lowercased, the repeat dropped");
    assert_eq!((&ada["phones"], &ada["company"], &ada["attributes"]), (&json!(["+14155550123"]), &json!("Engines"), &json!({ "tier": "gold" })));
    let grace = contact(&app, a, json!({ "name": "Grace Hopper", "emails": ["grace@navy.example"] })).await;
    assert_eq!((&grace["emails"], &grace["phones"], &grace["attributes"]), (&json!(["grace@navy.example"]), &json!([]), &json!({})));

    let (s, list) = app.get("/api/crm/contacts", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)));
    let names: Vec<&str> = list["data"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Grace Hopper", "Ada Lovelace"], "newest first");
    let (_, one) = app.get("/api/crm/contacts?email=ADA@example.com", Some(a)).await;
    assert_eq!((one["total"].as_i64(), &one["data"][0]["contact_id"]), (Some(1), &ada["contact_id"]));
    let (_, one) = app.get(&format!("/api/crm/contacts?owner_persona_id={}", t.a["persona_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!((one["total"].as_i64(), &one["data"][0]["name"]), (Some(1), &json!("Ada Lovelace")));
    let (_, one) = app.get("/api/crm/contacts?company=Engines&limit=1&offset=0", Some(a)).await;
    assert_eq!(one["total"].as_i64(), Some(1));
    let (_, page) = app.get("/api/crm/contacts?limit=1&offset=1", Some(a)).await;
    assert_eq!((page["total"].as_i64(), &page["data"][0]["name"]), (Some(2), &json!("Ada Lovelace")));
    let b = assert_error(app.get("/api/crm/contacts?limit=many&owner_persona_id=x", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["limit must be an integer"]));
    let b = assert_error(app.get("/api/crm/contacts?owner_persona_id=x", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id must be a UUID"]));

    let id = ada["contact_id"].as_str().unwrap();
    let (s, got) = app.get(&format!("/api/crm/contacts/{id}"), Some(a)).await;
    assert_eq!((s, &got["data"]), (StatusCode::OK, &ada));
    assert_error(app.get(&format!("/api/crm/contacts/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/crm/contacts/not-a-uuid", Some(a)).await, 404, "NotFound");
    let (_, none) = app.get("/api/crm/contacts", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0, "another tenant sees none of them");

    // An address names one contact of a tenant; another tenant may use it.
    let b = assert_error(app.post("/api/crm/contacts", Some(a), json!({ "name": "Ada again", "emails": ["ADA@example.com"] })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["another contact of this tenant has the email ada@example.com"]));
    contact(&app, &t.b_token, json!({ "name": "Ada at B", "emails": ["ada@example.com"] })).await;

    // The body against its schema first, every problem at once...
    let b = assert_error(
        app.post("/api/crm/contacts", Some(a), json!({ "emails": ["nope", 3], "phones": ["4155550123"], "owner_persona_id": "x", "attributes": [1] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name is required", "emails[1] must be a string", "owner_persona_id must be a UUID", "attributes must be a JSON object"]));
    let many: Vec<String> = (0..21).map(|i| format!("a{i}@example.com")).collect();
    let b =
        assert_error(app.post("/api/crm/contacts", Some(a), json!({ "name": "X", "emails": many, "company": "c".repeat(201) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["emails must hold at most 20 items", "company must be at most 200 characters"]));
    // ...then the addresses' forms.
    let b = assert_error(
        app.post("/api/crm/contacts", Some(a), json!({ "name": "X", "emails": ["nope", " "], "phones": ["4155550123"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["emails[0] must be an email address", "emails[1] must be an email address", "phones[0] must be an E.164 phone number (e.g. +14155550123)"])
    );
    let b = assert_error(app.post("/api/crm/contacts", Some(a), json!({ "name": "X", "owner_persona_id": t.b["persona_id"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id is not a persona of this tenant"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "crm.contact.created.v1").count(), 2);
}
db_test!(contacts_are_created_listed_newest_first_and_kept_to_their_tenant);

/// The totals of the contact list unfiltered, by company `Engines`, by
/// `Looms`, by `owner`, and by both `Engines` and `owner`, each checked
/// against the rows of the page.
async fn contact_totals(app: &TestApp, token: &str, owner: &str) -> Vec<i64> {
    let mut totals = Vec::new();
    for query in [
        "".to_string(),
        "company=Engines".into(),
        "company=Looms".into(),
        format!("owner_persona_id={owner}"),
        format!("company=Engines&owner_persona_id={owner}"),
    ] {
        let (s, page) = app.get(&format!("/api/crm/contacts?limit=500&{query}"), Some(token)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!(page["total"].as_u64(), Some(page["data"].as_array().unwrap().len() as u64), "{query}: {page}");
        totals.push(page["total"].as_i64().unwrap());
    }
    totals
}

/// The contacts' totals come from counts the writes keep (every filter of
/// one dimension): each must equal the rows the list holds, after creates,
/// a refused create, and an ingested update moving a contact's owner and
/// company.
async fn contact_totals_follow_creates_updates_and_refusals(app: TestApp) {
    let t = app.two_tenants("crm-counts").await;
    let a = t.a_token.as_str();
    let owner = t.a["persona_id"].as_str().unwrap();
    contact(&app, a, json!({ "name": "Ada", "emails": ["ada@example.com"], "company": "Engines", "owner_persona_id": owner })).await;
    contact(&app, a, json!({ "name": "Bea", "emails": ["bea@example.com"], "company": "Engines" })).await;
    contact(&app, a, json!({ "name": "Cy", "owner_persona_id": owner })).await;
    assert_error(
        app.post("/api/crm/contacts", Some(a), json!({ "name": "Ada again", "emails": ["ada@example.com"], "company": "Engines" })).await,
        409,
        "Conflict",
    );
    assert_eq!(contact_totals(&app, a, owner).await, [3, 2, 0, 2, 1]);
    let batch = json!({ "entity": "crm.contact", "mode": "upsert", "idempotency_key": "move-ada",
                        "records": [{ "name": "Ada", "emails": ["ada@example.com"], "company": "Looms" }] });
    let (s, r) = app.post("/api/ingest/batches", Some(a), batch).await;
    assert_eq!((s, r["data"]["results"][0]["outcome"].as_str()), (StatusCode::OK, Some("updated")), "{r}");
    assert_eq!(contact_totals(&app, a, owner).await, [3, 1, 1, 1, 0], "Ada moved to Looms and lost her owner");
    let (_, other) = app.get("/api/crm/contacts?company=Engines", Some(&t.b_token)).await;
    assert_eq!(other["total"], 0, "another tenant's counts are its own");
}
db_test!(contact_totals_follow_creates_updates_and_refusals);

async fn calls_are_logged_with_their_missed_event_and_merged_into_the_timeline(app: TestApp) {
    let t = app.two_tenants("crmcalls").await;
    let a = t.a_token.as_str();
    let ada = contact(&app, a, json!({ "name": "Ada", "emails": ["ada@example.com"] })).await;
    let ada_id = ada["contact_id"].as_str().unwrap();
    let (s, lead) = app.post("/api/crm/leads", Some(a), json!({ "name": "Engine order", "contact_id": ada_id, "source": "web" })).await;
    assert_eq!(s, StatusCode::CREATED, "{lead}");
    assert_eq!((&lead["data"]["status"], &lead["data"]["contact_id"], &lead["data"]["source"]), (&json!("new"), &json!(ada_id), &json!("web")));
    let lead_id = lead["data"]["lead_id"].as_str().unwrap();
    let (s, loose) = app.post("/api/crm/leads", Some(a), json!({ "name": "Cold lead", "status": "contacted" })).await;
    assert_eq!((s, &loose["data"]["contact_id"]), (StatusCode::CREATED, &Value::Null));

    let (s, call) = app
        .post(
            "/api/crm/calls",
            Some(a),
            json!({
                "contact_id": ada_id, "direction": "outbound", "disposition": "answered", "duration_seconds": 95, "phone_number": "+14155550123",
                "recording_url": "https://rec.example.com/1.mp3", "recording_consent": true, "provider_call_id": "CA1", "occurred_at": "2099-01-01T00:00:00Z",
            }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "a call far in the future is refused: {call}");
    let (s, call) = app
        .post(
            "/api/crm/calls",
            Some(a),
            json!({
                "contact_id": ada_id, "direction": "outbound", "disposition": "answered", "duration_seconds": 95, "phone_number": "+14155550123",
                "recording_url": "https://rec.example.com/1.mp3", "recording_consent": true, "provider_call_id": "CA1",
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{call}");
    let call = &call["data"];
    assert_eq!(
        (&call["direction"], &call["disposition"], &call["duration_seconds"], &call["recording_consent"], &call["provider_call_id"]),
        (&json!("outbound"), &json!("answered"), &json!(95), &json!(true), &json!("CA1"))
    );
    // A call of the lead lands on its contact's timeline.
    let (s, missed) =
        app.post("/api/crm/calls", Some(a), json!({ "lead_id": lead_id, "direction": "inbound", "disposition": "no_answer", "provider_call_id": "CA2" })).await;
    assert_eq!(s, StatusCode::CREATED, "{missed}");
    assert_eq!(
        (&missed["data"]["contact_id"], &missed["data"]["duration_seconds"], &missed["data"]["recording_consent"]),
        (&json!(ada_id), &json!(0), &json!(false))
    );
    let b = assert_error(
        app.post("/api/crm/calls", Some(a), json!({ "contact_id": ada_id, "direction": "inbound", "disposition": "busy", "provider_call_id": "CA1" })).await,
        409,
        "Conflict",
    );
    assert!(b["details"][0].as_str().unwrap().starts_with("provider_call_id CA1 is logged already"), "{b}");
    let (s, _) = app.post("/api/crm/calls", Some(&t.b_token), json!({ "lead_id": lead_id, "direction": "inbound", "disposition": "busy" })).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "another tenant's lead");
    let (s, _) = app.post("/api/crm/calls", Some(a), json!({ "lead_id": loose["data"]["lead_id"], "direction": "inbound", "disposition": "busy" })).await;
    assert_eq!(s, StatusCode::CREATED, "a lead without a contact takes calls too");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let crm: Vec<&str> = events.iter().map(String::as_str).filter(|e| e.starts_with("crm.")).collect();
    assert_eq!(
        crm,
        [
            "crm.contact.created.v1",
            "crm.lead.created.v1",
            "crm.lead.created.v1",
            "crm.call.logged.v1",
            "crm.call.logged.v1",
            "crm.call.missed.v1",
            "crm.call.logged.v1",
            "crm.call.missed.v1"
        ]
    );
    // The key set of every crm.call.logged.v1 (the voice webhook's too):
    // what the route does not know is null.
    let logged = payloads(&app, &t.a["tenant_id"], "crm.call.logged.v1").await;
    assert_eq!(
        logged[0],
        json!({ "call_id": call["call_id"], "call_leg_id": null, "contact_id": ada_id, "lead_id": null, "provider": null, "provider_call_id": "CA1",
                "direction": "outbound", "status": null, "disposition": "answered", "is_voicemail": null, "duration_seconds": 95,
                "recording_consent": true, "occurred_at": call["occurred_at"], "ended_at": null })
    );

    let (s, line) = app.get(&format!("/api/crm/contacts/{ada_id}/timeline"), Some(a)).await;
    assert_eq!((s, line["total"].as_i64()), (StatusCode::OK, Some(4)), "{line}");
    let kinds: Vec<&str> = line["data"].as_array().unwrap().iter().map(|t| t["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["call", "call", "lead_created", "contact_created"], "newest first");
    assert_eq!((&line["data"][0]["disposition"], &line["data"][0]["direction"]), (&json!("no_answer"), &json!("inbound")));
    assert_eq!((&line["data"][1]["duration_seconds"], &line["data"][2]["ref_id"]), (&json!(95), &json!(lead_id)));
    assert_eq!((&line["data"][3]["ref_id"], &line["data"][3]["duration_seconds"]), (&json!(ada_id), &Value::Null));
    let (_, page) = app.get(&format!("/api/crm/contacts/{ada_id}/timeline?limit=1&offset=3"), Some(a)).await;
    assert_eq!((page["total"].as_i64(), &page["data"][0]["kind"]), (Some(4), &json!("contact_created")));
    assert_error(app.get(&format!("/api/crm/contacts/{ada_id}/timeline?offset=-1"), Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/crm/contacts/{ada_id}/timeline"), Some(&t.b_token)).await, 404, "NotFound");
}
db_test!(calls_are_logged_with_their_missed_event_and_merged_into_the_timeline);

async fn calls_and_leads_report_every_problem_at_once(app: TestApp) {
    let t = app.two_tenants("crmbad").await;
    let a = t.a_token.as_str();
    let b = assert_error(
        app.post(
            "/api/crm/calls",
            Some(a),
            json!({ "direction": "sideways", "disposition": "hung_up", "duration_seconds": -1, "phone_number": "+1 415 555 0123",
                    "recording_url": "ftp://x", "occurred_at": "yesterday" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "direction must be one of: inbound, outbound",
            "disposition must be one of: answered, no_answer, busy, failed, voicemail",
            "duration_seconds must be an integer from 0 to 86400",
            "occurred_at must be an RFC 3339 timestamp"
        ])
    );
    let b = assert_error(
        app.post(
            "/api/crm/calls",
            Some(a),
            json!({ "direction": "inbound", "disposition": "busy", "phone_number": "+1 415 555 0123", "recording_url": "ftp://x",
                    "occurred_at": "2999-01-01T00:00:00Z" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "a call needs a contact_id or a lead_id",
            "phone_number must be an E.164 phone number (e.g. +14155550123)",
            "recording_url must be an http or https URL",
            "recording_url needs recording_consent: true",
            "occurred_at must not be more than 5 minutes in the future"
        ])
    );
    let b = assert_error(
        app.post("/api/crm/calls", Some(a), json!({ "contact_id": "x", "lead_id": "y", "direction": "inbound", "disposition": "busy" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["contact_id must be a UUID", "lead_id must be a UUID"]));
    let other = contact(&app, &t.b_token, json!({ "name": "B's" })).await;
    let b = assert_error(
        app.post("/api/crm/calls", Some(a), json!({ "contact_id": other["contact_id"], "direction": "inbound", "disposition": "busy" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["contact_id is not a contact of this tenant"]));
    let mine = contact(&app, a, json!({ "name": "Mine" })).await;
    let theirs = contact(&app, a, json!({ "name": "Theirs" })).await;
    let (_, lead) = app.post("/api/crm/leads", Some(a), json!({ "name": "L", "contact_id": theirs["contact_id"] })).await;
    let b = assert_error(
        app.post(
            "/api/crm/calls",
            Some(a),
            json!({ "contact_id": mine["contact_id"], "lead_id": lead["data"]["lead_id"], "direction": "inbound", "disposition": "busy" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["lead_id is a lead of another contact"]));
    let b = assert_error(app.post("/api/crm/leads", Some(a), json!({ "status": "hot", "contact_id": "x" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required", "contact_id must be a UUID", "status must be one of: new, contacted, qualified, unqualified"]));
    let b = assert_error(app.post("/api/crm/leads", Some(a), json!({ "name": "L", "contact_id": other["contact_id"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["contact_id is not a contact of this tenant"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| e.starts_with("crm.call.")).count(), 0, "nothing refused was recorded");
}
db_test!(calls_and_leads_report_every_problem_at_once);

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    app.call(reqwest::Method::PATCH, path, Some(token), Some(body)).await
}

async fn delete(app: &TestApp, path: &str, token: &str) -> (StatusCode, Value) {
    app.call(reqwest::Method::DELETE, path, Some(token), None).await
}

/// The payloads the tenant's audit chain holds for `event_type`, oldest first.
async fn payloads(app: &TestApp, tenant_id: &Value, event_type: &str) -> Vec<Value> {
    let rows: Vec<Option<String>> = sqlx::query_scalar("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type = $2 ORDER BY pool_index, seq")
        .bind(tenant_id.as_str().unwrap())
        .bind(event_type)
        .fetch_all(&app.state().db.read)
        .await
        .unwrap();
    rows.into_iter().map(|p| serde_json::from_str(&p.unwrap()).unwrap()).collect()
}

async fn contacts_are_changed_and_then_erased_to_a_tombstone(app: TestApp) {
    let t = app.two_tenants("crm-life").await;
    let a = t.a_token.as_str();
    let owner = t.a["persona_id"].as_str().unwrap();
    let ada = contact(
        &app,
        a,
        json!({ "name": "Ada Lovelace", "emails": ["ada@example.com"], "phones": ["+14155550123"], "company": "Engines", "owner_persona_id": owner,
                "attributes": { "tier": "gold" } }),
    )
    .await;
    let id = ada["contact_id"].as_str().unwrap();
    let path = format!("/api/crm/contacts/{id}");
    contact(&app, a, json!({ "name": "Grace Hopper", "emails": ["grace@navy.example"] })).await;

    // Refusals: nothing to change, bad fields (every one), a foreign owner,
    // an address of another contact, another tenant, an unknown id.
    let b = assert_error(patch(&app, &path, a, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, emails, phones, company, owner_persona_id, attributes"]));
    let b = assert_error(patch(&app, &path, a, json!({ "name": " ", "emails": ["nope"], "phones": ["4155550123"] })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["name must not be blank", "emails[0] must be an email address", "phones[0] must be an E.164 phone number (e.g. +14155550123)"])
    );
    let b = assert_error(patch(&app, &path, a, json!({ "owner_persona_id": "x", "attributes": [] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id must be a UUID", "attributes must be a JSON object"]));
    let b = assert_error(patch(&app, &path, a, json!({ "owner_persona_id": t.b["persona_id"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id is not a persona of this tenant"]));
    let b = assert_error(patch(&app, &path, a, json!({ "emails": ["GRACE@navy.example"] })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["another contact of this tenant has the email grace@navy.example"]));
    assert_error(patch(&app, &path, &t.b_token, json!({ "name": "Mine" })).await, 404, "NotFound");
    assert_error(patch(&app, "/api/crm/contacts/0190a5a4-7c3e-7000-8000-000000000000", a, json!({ "name": "X" })).await, 404, "NotFound");

    // A change: what is given replaces, what is not stays.
    let (s, changed) = patch(&app, &path, a, json!({ "emails": ["Ada@New.example"], "company": "", "attributes": { "tier": "silver" } })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    let c = &changed["data"];
    assert_eq!((&c["emails"], &c["company"], &c["attributes"]), (&json!(["ada@new.example"]), &Value::Null, &json!({ "tier": "silver" })));
    assert_eq!((&c["name"], &c["phones"], &c["owner_persona_id"]), (&json!("Ada Lovelace"), &json!(["+14155550123"]), &json!(owner)));
    let (_, got) = app.get(&path, Some(a)).await;
    assert_eq!(got["data"], *c);
    let (_, one) = app.get("/api/crm/contacts?email=ada@new.example", Some(a)).await;
    assert_eq!((one["total"].as_i64(), &one["data"][0]["contact_id"]), (Some(1), &json!(id)));
    let (_, none) = app.get("/api/crm/contacts?company=Engines", Some(a)).await;
    assert_eq!(none["total"], 0, "the company count followed the change");
    // The address left out names no contact any more.
    contact(&app, a, json!({ "name": "Ada's namesake", "emails": ["ada@example.com"] })).await;

    // What refers to the contact: a call, a lead, a ticket.
    let (s, call) = app
        .post(
            "/api/crm/calls",
            Some(a),
            json!({ "contact_id": id, "direction": "outbound", "disposition": "answered", "phone_number": "+14155550123",
                    "recording_url": "https://rec.example.com/1.mp3", "recording_consent": true }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{call}");
    let (s, lead) = app.post("/api/crm/leads", Some(a), json!({ "name": "Engine order", "contact_id": id })).await;
    assert_eq!(s, StatusCode::CREATED, "{lead}");
    let (s, event) = app.post("/api/tickets/events", Some(a), json!({ "name": "Gala", "starts_at": "2099-01-01T18:00:00Z" })).await;
    assert_eq!(s, StatusCode::CREATED, "{event}");
    let (s, ticket) =
        app.post("/api/tickets", Some(a), json!({ "event_id": event["data"]["event_id"], "holder_name": "Ada Lovelace", "contact_id": id })).await;
    assert_eq!(s, StatusCode::CREATED, "{ticket}");
    let (_, hits) = app.get("/api/search?q=lovelace", Some(a)).await;
    assert_eq!(hits["total"], 1, "{hits}");

    // Erasure: another tenant cannot; the contact can, once.
    assert_error(delete(&app, &path, &t.b_token).await, 404, "NotFound");
    let (s, erased) = delete(&app, &path, a).await;
    assert_eq!(s, StatusCode::OK, "{erased}");
    assert_eq!((&erased["data"]["contact_id"], &erased["data"]["erased"]), (&json!(id), &json!(true)));
    assert!(erased["data"]["erased_at"].is_string(), "{erased}");
    assert_error(delete(&app, &path, a).await, 404, "NotFound");
    assert_error(app.get(&path, Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("{path}/timeline"), Some(a)).await, 404, "NotFound");
    assert_error(patch(&app, &path, a, json!({ "name": "Back" })).await, 404, "NotFound");
    let (_, list) = app.get("/api/crm/contacts", Some(a)).await;
    assert_eq!(list["total"], 2, "Grace and the namesake: {list}");
    assert!(list["data"].as_array().unwrap().iter().all(|c| c["contact_id"] != json!(id)));
    let (_, owned) = app.get(&format!("/api/crm/contacts?owner_persona_id={owner}"), Some(a)).await;
    assert_eq!(owned["total"], 0, "the owner count followed the erasure");
    let (_, hits) = app.get("/api/search?q=lovelace", Some(a)).await;
    assert_eq!(hits["total"], 0, "out of the search index: {hits}");
    // Its address is free, its calls and tickets keep the id only.
    contact(&app, a, json!({ "name": "Someone new", "emails": ["ada@new.example"] })).await;
    let (_, call) = app.get(&format!("/api/crm/calls/{}", call["data"]["call_id"].as_str().unwrap()), Some(a)).await;
    let c = &call["data"];
    assert_eq!((&c["contact_id"], &c["phone_number"], &c["recording_url"]), (&json!(id), &Value::Null, &Value::Null));
    let (_, tickets) = app.get(&format!("/api/tickets?event_id={}", event["data"]["event_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!((&tickets["data"][0]["contact_id"], &tickets["data"][0]["holder_name"]), (&json!(id), &Value::Null));
    let (_, kept) = app.get(&format!("/api/crm/leads/{}", lead["data"]["lead_id"].as_str().unwrap()), Some(a)).await;
    assert_eq!((&kept["data"]["name"], &kept["data"]["contact_id"]), (&json!("Engine order"), &json!(id)), "a lead is its own record");
    let b = assert_error(app.post("/api/crm/leads", Some(a), json!({ "name": "L", "contact_id": id })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["contact_id is not a contact of this tenant"]));

    // The chain: one update, one erasure naming the id only.
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "crm.contact.updated.v1").count(), 1);
    assert_eq!(payloads(&app, &t.a["tenant_id"], "crm.contact.updated.v1").await, [json!({ "contact_id": id, "fields": ["emails", "company", "attributes"] })]);
    assert_eq!(payloads(&app, &t.a["tenant_id"], "crm.contact.erased.v1").await, [json!({ "contact_id": id })]);
}
db_test!(contacts_are_changed_and_then_erased_to_a_tombstone);

async fn leads_are_listed_read_moved_along_their_states_and_deleted(app: TestApp) {
    let t = app.two_tenants("crm-leads").await;
    let a = t.a_token.as_str();
    let owner = t.a["persona_id"].as_str().unwrap();
    let ada = contact(&app, a, json!({ "name": "Ada" })).await;
    let ada_id = ada["contact_id"].as_str().unwrap();
    let mut leads = Vec::new();
    for body in [
        json!({ "name": "Engine order", "contact_id": ada_id, "source": "web", "owner_persona_id": owner }),
        json!({ "name": "Loom order", "source": "referral", "status": "contacted" }),
        json!({ "name": "Cold" }),
    ] {
        let (s, lead) = app.post("/api/crm/leads", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{lead}");
        leads.push(lead["data"].clone());
    }
    let ids: Vec<&str> = leads.iter().map(|l| l["lead_id"].as_str().unwrap()).collect();
    let listed = |v: &Value| v["data"].as_array().unwrap().iter().map(|l| l["lead_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/crm/leads", Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)));
    assert_eq!(listed(&all), [ids[2], ids[1], ids[0]], "newest first");
    for (query, expected) in [
        ("status=contacted".to_string(), vec![ids[1]]),
        ("source=web".into(), vec![ids[0]]),
        (format!("contact_id={ada_id}"), vec![ids[0]]),
        (format!("owner_persona_id={owner}"), vec![ids[0]]),
        ("status=new&limit=1&offset=1".into(), vec![ids[0]]),
    ] {
        let (s, page) = app.get(&format!("/api/crm/leads?{query}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!(listed(&page), expected, "{query}");
        let total = if query.starts_with("status=new") { 2 } else { 1 };
        assert_eq!(page["total"], total, "{query}");
    }
    let b = assert_error(app.get("/api/crm/leads?status=hot&contact_id=x", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["status must be one of: new, contacted, qualified, unqualified", "contact_id must be a UUID"]));
    let (_, none) = app.get("/api/crm/leads", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0);

    let path = format!("/api/crm/leads/{}", ids[0]);
    let (s, got) = app.get(&path, Some(a)).await;
    assert_eq!((s, &got["data"]), (StatusCode::OK, &leads[0]));
    assert_error(app.get(&path, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/crm/leads/not-a-uuid", Some(a)).await, 404, "NotFound");

    // Changes: refused ones first.
    let b = assert_error(patch(&app, &path, a, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, company, source, status, owner_persona_id, attributes"]));
    let b = assert_error(patch(&app, &path, a, json!({ "status": "hot", "source": "s".repeat(65) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["source must be at most 64 characters", "status must be one of: new, contacted, qualified, unqualified"]));
    let b = assert_error(patch(&app, &path, a, json!({ "name": "" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name must not be blank"]));
    let b = assert_error(patch(&app, &path, a, json!({ "owner_persona_id": t.b["persona_id"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["owner_persona_id is not a persona of this tenant"]));
    assert_error(patch(&app, &path, &t.b_token, json!({ "status": "contacted" })).await, 404, "NotFound");

    let (s, moved) = patch(&app, &path, a, json!({ "status": "contacted", "attributes": { "budget": 5 }, "source": "" })).await;
    assert_eq!(s, StatusCode::OK, "{moved}");
    let m = &moved["data"];
    assert_eq!((&m["status"], &m["attributes"], &m["source"]), (&json!("contacted"), &json!({ "budget": 5 }), &Value::Null));
    assert_eq!((&m["name"], &m["owner_persona_id"], &m["contact_id"]), (&json!("Engine order"), &json!(owner), &json!(ada_id)));
    let b = assert_error(patch(&app, &path, a, json!({ "status": "new" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the lead is contacted: a lead cannot go back to new"]));
    let (s, q) = patch(&app, &path, a, json!({ "status": "qualified", "name": "Big engine order" })).await;
    assert_eq!((s, &q["data"]["status"], &q["data"]["name"]), (StatusCode::OK, &json!("qualified"), &json!("Big engine order")));
    let b = assert_error(patch(&app, &path, a, json!({ "status": "unqualified" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the lead is qualified: only a new or contacted lead can become unqualified"]));
    let (s, again) = patch(&app, &path, a, json!({ "status": "qualified" })).await;
    assert_eq!((s, &again["data"]["status"]), (StatusCode::OK, &json!("qualified")), "the status it has is no move");
    let (_, qualified) = app.get("/api/crm/leads?status=qualified", Some(a)).await;
    assert_eq!(listed(&qualified), [ids[0]]);
    let (_, hits) = app.get("/api/search?q=big", Some(a)).await;
    assert_eq!(hits["total"], 1, "indexed again: {hits}");

    // Deleting: the lead's own call goes with it, a contact's call stays.
    let call = |body: Value| async {
        let (s, c) = app.post("/api/crm/calls", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
        c["data"]["call_id"].as_str().unwrap().to_string()
    };
    let of_contact = call(json!({ "lead_id": ids[0], "direction": "inbound", "disposition": "answered" })).await;
    let of_lead = call(json!({ "lead_id": ids[2], "direction": "outbound", "disposition": "busy" })).await;
    assert_error(delete(&app, &path, &t.b_token).await, 404, "NotFound");
    let (s, gone) = delete(&app, &path, a).await;
    assert_eq!((s, &gone["data"]), (StatusCode::OK, &json!({ "lead_id": ids[0], "deleted": true })));
    assert_error(delete(&app, &path, a).await, 404, "NotFound");
    assert_error(app.get(&path, Some(a)).await, 404, "NotFound");
    assert_error(patch(&app, &path, a, json!({ "status": "qualified" })).await, 404, "NotFound");
    let (_, kept) = app.get(&format!("/api/crm/calls/{of_contact}"), Some(a)).await;
    assert_eq!((&kept["data"]["contact_id"], &kept["data"]["lead_id"]), (&json!(ada_id), &Value::Null));
    let (s, gone) = delete(&app, &format!("/api/crm/leads/{}", ids[2]), a).await;
    assert_eq!(s, StatusCode::OK, "{gone}");
    assert_error(app.get(&format!("/api/crm/calls/{of_lead}"), Some(a)).await, 404, "NotFound");
    let (_, hits) = app.get("/api/search?q=big", Some(a)).await;
    assert_eq!(hits["total"], 0, "{hits}");
    let (_, left) = app.get("/api/crm/leads", Some(a)).await;
    assert_eq!(listed(&left), [ids[1]]);

    let tenant = &t.a["tenant_id"];
    let updated: Vec<Value> = payloads(&app, tenant, "crm.lead.updated.v1").await;
    assert_eq!(updated.len(), 3, "the three changes that passed");
    assert_eq!(updated[0], json!({ "lead_id": ids[0], "fields": ["source", "status", "attributes"], "status": "contacted" }));
    let deleted = payloads(&app, tenant, "crm.lead.deleted.v1").await;
    assert_eq!(deleted, [json!({ "lead_id": ids[0], "calls_deleted": [] }), json!({ "lead_id": ids[2], "calls_deleted": [of_lead] })]);
}
db_test!(leads_are_listed_read_moved_along_their_states_and_deleted);

async fn calls_are_listed_by_contact_lead_disposition_and_direction_and_read(app: TestApp) {
    let t = app.two_tenants("crm-call-list").await;
    let a = t.a_token.as_str();
    let ada = contact(&app, a, json!({ "name": "Ada" })).await;
    let ada_id = ada["contact_id"].as_str().unwrap();
    let (_, lead) = app.post("/api/crm/leads", Some(a), json!({ "name": "L", "contact_id": ada_id })).await;
    let lead_id = lead["data"]["lead_id"].as_str().unwrap();
    let (_, loose) = app.post("/api/crm/leads", Some(a), json!({ "name": "M" })).await;
    let mut calls = Vec::new();
    for body in [
        json!({ "contact_id": ada_id, "direction": "outbound", "disposition": "answered", "duration_seconds": 60 }),
        json!({ "lead_id": lead_id, "direction": "inbound", "disposition": "no_answer" }),
        json!({ "lead_id": loose["data"]["lead_id"], "direction": "inbound", "disposition": "busy" }),
    ] {
        let (s, c) = app.post("/api/crm/calls", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
        calls.push(c["data"].clone());
    }
    let ids: Vec<&str> = calls.iter().map(|c| c["call_id"].as_str().unwrap()).collect();
    let listed = |v: &Value| v["data"].as_array().unwrap().iter().map(|c| c["call_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/crm/calls", Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)));
    assert_eq!(listed(&all), [ids[2], ids[1], ids[0]], "newest first");
    assert_eq!(all["data"][2], calls[0]);
    for (query, expected) in [
        (format!("contact_id={ada_id}"), vec![ids[1], ids[0]]),
        (format!("lead_id={lead_id}"), vec![ids[1]]),
        ("disposition=busy".to_string(), vec![ids[2]]),
        ("direction=inbound&limit=1&offset=1".into(), vec![ids[1]]),
        ("direction=outbound&disposition=answered".into(), vec![ids[0]]),
    ] {
        let (s, page) = app.get(&format!("/api/crm/calls?{query}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!(listed(&page), expected, "{query}");
        let total = if query.starts_with("direction=inbound") || query.starts_with("contact_id") { 2 } else { 1 };
        assert_eq!(page["total"], total, "{query}");
    }
    let b = assert_error(app.get("/api/crm/calls?lead_id=x&disposition=hung_up", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["lead_id must be a UUID", "disposition must be one of: answered, no_answer, busy, failed, voicemail"]));
    let (_, none) = app.get("/api/crm/calls", Some(&t.b_token)).await;
    assert_eq!(none["total"], 0);

    let path = format!("/api/crm/calls/{}", ids[0]);
    let (s, got) = app.get(&path, Some(a)).await;
    assert_eq!((s, &got["data"]), (StatusCode::OK, &calls[0]));
    assert_error(app.get(&path, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/crm/calls/not-a-uuid", Some(a)).await, 404, "NotFound");
}
db_test!(calls_are_listed_by_contact_lead_disposition_and_direction_and_read);
