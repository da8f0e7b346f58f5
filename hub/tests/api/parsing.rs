//! sdk-parsing: contacts extracted from a batch of captures, each capture
//! on its own (a malformed one does not fail the others), nothing stored
//! but one event with counts.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const EXTRACT: &str = "/api/parsing/contacts/extract";

async fn the_payload_of_the_batch_event(app: &TestApp, tenant_id: &Value) -> Vec<Value> {
    let payloads: Vec<String> =
        sqlx::query_scalar("SELECT payload FROM audit_entry WHERE tenant_id = $1 AND event_type = 'parsing.batch.completed.v1' ORDER BY seq")
            .bind(tenant_id.as_str().unwrap())
            .fetch_all(&app.state().db.read)
            .await
            .unwrap();
    payloads.iter().map(|p| serde_json::from_str(p).unwrap()).collect()
}

async fn contacts_come_out_of_each_kind_of_capture_with_e164_numbers(app: TestApp) {
    let t = app.two_tenants("parse").await;
    let vcard =
        "BEGIN:VCARD\r\nVERSION:4.0\r\nFN:Jane Doe\r\nN:Doe;Jane;;;\r\nEMAIL;TYPE=work:jane@example.com\r\nTEL;TYPE=cell:+44 7400 123456\r\nEND:VCARD\r\n";
    let email = "From: Carol Jones <carol@example.net>\r\nTo: \"Doe, Jane\" <jane@example.com>, bob@example.org\r\nSubject: hi\r\n\r\nSee you.\r\n-- \r\nCarol Jones\r\nT 010-123 4567\r\n";
    let batch = json!({ "default_region": "NL", "captures": [
        { "source_kind": "vcard", "raw": vcard },
        { "source_kind": "text", "raw": "Ask Jane Doe <jane@example.com> (or JANE@example.com), call 06 12345678 or +1 099 555 0123." },
        { "source_kind": "text", "raw": "Call (201) 555-0123 today", "default_region": "us" },
        { "source_kind": "email", "raw": email },
        { "source_kind": "signature", "raw": "Best regards,\nJan van der Berg\nAcme B.V.\nM +31 6 1234 5678\njan@acme.example" },
    ]});
    let (s, r) = app.post(EXTRACT, Some(&t.a_token), batch).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let c = &r["data"]["captures"];
    assert_eq!(
        c[0],
        json!({ "index": 0, "source_kind": "vcard", "errors": [], "rejected_phones": [],
                "contacts": [{ "name": "Jane Doe", "emails": ["jane@example.com"], "phones": ["+447400123456"] }] })
    );
    // The same address twice is one; the national number takes the batch's region; an invalid one is reported.
    assert_eq!(c[1]["contacts"], json!([{ "name": "Jane Doe", "emails": ["jane@example.com"], "phones": ["+31612345678"] }]));
    assert_eq!(c[1]["rejected_phones"], json!([{ "text": "+1 099 555 0123", "reason": "invalid" }]));
    assert_eq!(c[2]["contacts"], json!([{ "name": null, "emails": [], "phones": ["+12015550123"] }]), "the capture's own region");
    assert_eq!(
        c[3]["contacts"],
        json!([
            { "name": "Carol Jones", "emails": ["carol@example.net"], "phones": ["+31101234567"] },
            { "name": "Doe, Jane", "emails": ["jane@example.com"], "phones": [] },
            { "name": null, "emails": ["bob@example.org"], "phones": [] },
        ])
    );
    assert_eq!(c[4]["contacts"], json!([{ "name": "Jan van der Berg", "emails": ["jan@acme.example"], "phones": ["+31612345678"] }]));

    // Without a region a national number cannot be placed: reported, not guessed.
    let (s, r) = app.post(EXTRACT, Some(&t.a_token), json!({ "captures": [{ "source_kind": "ocr", "raw": "Jane Doe\n010 123 4567" }] })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let only = &r["data"]["captures"][0];
    assert_eq!(
        (&only["contacts"], &only["rejected_phones"]),
        (&json!([{ "name": "Jane Doe", "emails": [], "phones": [] }]), &json!([{ "text": "010 123 4567", "reason": "region_required" }]))
    );

    // Nothing is stored but one event per batch, with counts and no personal data.
    let payloads = the_payload_of_the_batch_event(&app, &t.a["tenant_id"]).await;
    assert_eq!(payloads[0], json!({ "captures": 5, "failed": 0, "contacts": 7, "emails": 6, "phones": 5, "rejected_phones": 1 }));
    assert_eq!(payloads.len(), 2);
    assert!(app.events_of(&t.b["tenant_id"]).await.iter().all(|e| e != "parsing.batch.completed.v1"));
}
db_test!(contacts_come_out_of_each_kind_of_capture_with_e164_numbers);

async fn a_malformed_capture_gets_its_own_errors_and_the_batch_goes_on(app: TestApp) {
    let t = app.two_tenants("parse-bad").await;
    let batch = json!({ "captures": [
        { "source_kind": "text", "raw": "ops@example.com" },
        { "raw": 42, "default_region": "XX" },
        "not an object",
        { "source_kind": "fax", "raw": "x".repeat(64 * 1024 + 1) },
        { "source_kind": "vcard", "raw": "  " },
        { "source_kind": "signature", "raw": "Jane Doe <jane@example.com>" },
    ]});
    let (s, r) = app.post(EXTRACT, Some(&t.a_token), batch).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let c = r["data"]["captures"].as_array().unwrap();
    let errors: Vec<&Value> = c.iter().map(|c| &c["errors"]).collect();
    assert_eq!(
        errors,
        [
            &json!([]),
            &json!(["source_kind is required", "raw must be a string", "default_region must be an ISO 3166-1 alpha-2 code"]),
            &json!(["capture must be an object"]),
            &json!(["source_kind must be one of: email, vcard, text, signature, ocr", "raw must be at most 65536 bytes"]),
            &json!(["raw is required"]),
            &json!([]),
        ]
    );
    assert_eq!((c[3]["source_kind"].as_str(), c[3]["contacts"].as_array().map(Vec::len)), (Some("fax"), Some(0)));
    assert_eq!(c[0]["contacts"], json!([{ "name": null, "emails": ["ops@example.com"], "phones": [] }]));
    assert_eq!(c[5]["contacts"], json!([{ "name": "Jane Doe", "emails": ["jane@example.com"], "phones": [] }]));
    let payloads = the_payload_of_the_batch_event(&app, &t.a["tenant_id"]).await;
    assert_eq!(payloads, [json!({ "captures": 6, "failed": 4, "contacts": 2, "emails": 2, "phones": 0, "rejected_phones": 0 })]);
}
db_test!(a_malformed_capture_gets_its_own_errors_and_the_batch_goes_on);

async fn a_batch_that_is_not_one_is_refused_whole(app: TestApp) {
    let t = app.two_tenants("parse-env").await;
    let a = Some(t.a_token.as_str());
    let capture = json!({ "source_kind": "text", "raw": "a@example.com" });
    let b = assert_error(app.post(EXTRACT, a, json!({ "captures": vec![capture.clone(); 101] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["captures must hold 1 to 100 items"]));
    let (s, r) = app.post(EXTRACT, a, json!({ "captures": vec![capture.clone(); 100] })).await;
    assert_eq!((s, r["data"]["captures"].as_array().map(Vec::len)), (StatusCode::OK, Some(100)));
    let b = assert_error(app.post(EXTRACT, a, json!({ "default_region": 31 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["captures is required", "default_region must be a string"]));
    // Matching its schema, the batch still names a region libphonenumber knows.
    let b = assert_error(app.post(EXTRACT, a, json!({ "captures": [capture.clone()], "default_region": "XX" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["default_region must be an ISO 3166-1 alpha-2 code"]));
    let b = assert_error(app.post(EXTRACT, a, json!({ "captures": [] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["captures must hold 1 to 100 items"]));
    for wrong in [json!({ "captures": { "0": capture } }), json!({ "captures": "a@example.com" })] {
        let b = assert_error(app.post(EXTRACT, a, wrong).await, 400, "ValidationError");
        assert_eq!(b["details"], json!(["captures must be an array"]));
    }
    assert_error(app.post(EXTRACT, a, json!([capture])).await, 400, "ValidationError");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "parsing.batch.completed.v1").count(), 1, "refused batches record nothing");
}
db_test!(a_batch_that_is_not_one_is_refused_whole);
