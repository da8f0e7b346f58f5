//! sdk-ingest: batches of crm contacts and leads, per-record results, an
//! idempotency key per batch, provenance per record, one audit entry each.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn count(app: &TestApp, sql: &str, tenant: &Value) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).bind(tenant.as_str().unwrap()).fetch_one(&app.state().db.read).await.unwrap()
}

async fn contacts_are_inserted_skipped_and_upserted_once_per_key(app: TestApp) {
    let t = app.two_tenants("ingest").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (s, existing) = app.post("/api/crm/contacts", Some(a), json!({ "name": "Ana", "emails": ["ana@example.com"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{existing}");
    let ana = existing["data"]["contact_id"].clone();
    let batch = json!({
        "entity": "crm.contact", "mode": "insert", "idempotency_key": "import-1",
        "records": [
            { "name": "Bo", "emails": ["BO@example.com"], "company": "Acme" },
            { "name": "Ana again", "emails": ["ana@example.com"] },
            { "emails": ["not-an-address"], "phones": ["12"] },
            "not an object",
            { "name": "Bo twice", "emails": ["bo@example.com"] }
        ]
    });
    let (s, r) = app.post("/api/ingest/batches", Some(a), batch.clone()).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let d = &r["data"];
    assert_eq!(
        (d["entity"].as_str(), d["mode"].as_str(), d["imported"].as_i64(), d["skipped"].as_i64()),
        (Some("crm.contact"), Some("insert"), Some(1), Some(2))
    );
    assert_eq!(
        d["errors"],
        json!([
            { "index": 2, "details": ["name is required", "emails[0] must be an email address", "phones[0] must be an E.164 phone number (e.g. +14155550123)"] },
            { "index": 3, "details": ["the record must be an object"] }
        ])
    );
    let bo = d["results"][0]["id"].clone();
    assert_eq!(d["results"][0]["outcome"], "inserted");
    assert_eq!(d["results"][1], json!({ "index": 1, "outcome": "skipped", "id": ana }));
    assert_eq!(d["results"][4], json!({ "index": 4, "outcome": "skipped", "id": bo }));
    let (s, c) = app.get(&format!("/api/crm/contacts/{}", bo.as_str().unwrap()), Some(a)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!((c["data"]["name"].as_str(), c["data"]["emails"].clone(), c["data"]["company"].as_str()), (Some("Bo"), json!(["bo@example.com"]), Some("Acme")));

    // A replay answers the first result and writes nothing.
    let (s, again) = app.post("/api/ingest/batches", Some(a), batch.clone()).await;
    assert_eq!((s, &again), (StatusCode::OK, &r));
    assert_eq!(count(&app, "SELECT COUNT(*) FROM crm_contact WHERE tenant_id = $1", &tenant).await, 2);
    let mut other = batch.clone();
    other["records"] = json!([{ "name": "Cy" }]);
    let b = assert_error(app.post("/api/ingest/batches", Some(a), other).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["idempotency_key import-1 was used for another batch"]));

    // Upsert: the matched contact is updated, its addresses kept.
    let (s, r) = app
        .post(
            "/api/ingest/batches",
            Some(a),
            json!({ "entity": "crm.contact", "mode": "upsert", "idempotency_key": "import-2", "records": [
                { "name": "Ana Lopez", "emails": ["ana@example.com", "ana@work.example.com"], "company": "Initech" },
                { "name": "Both", "emails": ["ana@example.com", "bo@example.com"] }
            ] }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["imported"].as_i64(), r["data"]["skipped"].as_i64()), (Some(1), Some(0)));
    assert_eq!(r["data"]["results"][0], json!({ "index": 0, "outcome": "updated", "id": ana }));
    assert_eq!(r["data"]["errors"], json!([{ "index": 1, "details": ["the emails name 2 different contacts"] }]));
    let (_, c) = app.get(&format!("/api/crm/contacts/{}", ana.as_str().unwrap()), Some(a)).await;
    assert_eq!((c["data"]["name"].as_str(), c["data"]["company"].as_str()), (Some("Ana Lopez"), Some("Initech")));
    assert_eq!(c["data"]["emails"], json!(["ana@example.com", "ana@work.example.com"]));
    let (_, found) = app.get("/api/crm/contacts?email=ana@work.example.com", Some(a)).await;
    assert_eq!(found["data"][0]["contact_id"], ana);

    // Provenance: each written record, by batch and hash; one audit entry per batch.
    assert_eq!(count(&app, "SELECT COUNT(*) FROM ingest_record WHERE tenant_id = $1", &tenant).await, 2);
    let outcomes: Vec<(String, String)> = sqlx::query_as("SELECT entity_id, outcome FROM ingest_record WHERE tenant_id = $1 ORDER BY created_at, record_index")
        .bind(tenant.as_str().unwrap())
        .fetch_all(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(outcomes, vec![(bo.as_str().unwrap().to_string(), "inserted".to_string()), (ana.as_str().unwrap().to_string(), "updated".to_string())]);
    let events = app.events_of(&tenant).await;
    assert_eq!(events.iter().filter(|e| *e == "ingest.batch.received.v1").count(), 2);
    assert_eq!(events.iter().filter(|e| *e == "crm.contact.created.v1").count(), 1, "only the contact made through its route");

    // The key is the tenant's: another tenant may use it.
    let (s, r) = app
        .post(
            "/api/ingest/batches",
            Some(&t.b_token),
            json!({ "entity": "crm.lead", "mode": "insert", "idempotency_key": "import-1", "records": [{ "name": "L" }] }),
        )
        .await;
    assert_eq!((s, r["data"]["imported"].as_i64()), (StatusCode::OK, Some(1)));
}
db_test!(contacts_are_inserted_skipped_and_upserted_once_per_key);

async fn leads_are_inserted_or_updated_by_lead_id(app: TestApp) {
    let t = app.two_tenants("ingestl").await;
    let a = t.a_token.as_str();
    let (_, c) = app.post("/api/crm/contacts", Some(a), json!({ "name": "Ana", "emails": ["ana@example.com"] })).await;
    let contact = c["data"]["contact_id"].clone();
    let (s, r) = app
        .post(
            "/api/ingest/batches",
            Some(a),
            json!({ "entity": "crm.lead", "mode": "upsert", "idempotency_key": "leads-1", "records": [
                { "name": "Fleet deal", "contact_id": contact, "source": "fair", "status": "contacted" },
                { "name": "Bad", "status": "won", "contact_id": "00000000-0000-7000-8000-000000000000" },
                { "name": "Lost", "lead_id": "00000000-0000-7000-8000-000000000001" }
            ] }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["imported"].as_i64(), r["data"]["skipped"].as_i64()), (Some(1), Some(0)));
    assert_eq!(
        r["data"]["errors"],
        json!([
            { "index": 1, "details": ["status must be one of: new, contacted, qualified, unqualified"] },
            { "index": 2, "details": ["lead_id 00000000-0000-7000-8000-000000000001 is not a lead of this tenant"] }
        ])
    );
    let lead = r["data"]["results"][0]["id"].clone();
    let (s, r) = app
        .post(
            "/api/ingest/batches",
            Some(a),
            json!({ "entity": "crm.lead", "mode": "upsert", "idempotency_key": "leads-2", "records": [
                { "lead_id": lead, "name": "Fleet deal", "contact_id": contact, "status": "qualified" },
                { "name": "Unknown contact", "contact_id": "00000000-0000-7000-8000-000000000000" }
            ] }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["results"][0], json!({ "index": 0, "outcome": "updated", "id": lead }));
    assert_eq!(r["data"]["errors"], json!([{ "index": 1, "details": ["contact_id is not a contact of this tenant"] }]));
    let status: String =
        sqlx::query_scalar("SELECT status FROM crm_lead WHERE lead_id = $1").bind(lead.as_str().unwrap()).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(status, "qualified");
    // Insert mode skips a lead that is there.
    let (_, r) = app
        .post(
            "/api/ingest/batches",
            Some(a),
            json!({ "entity": "crm.lead", "mode": "insert", "idempotency_key": "leads-3", "records": [{ "lead_id": lead, "name": "x" }] }),
        )
        .await;
    assert_eq!((r["data"]["imported"].as_i64(), r["data"]["skipped"].as_i64()), (Some(0), Some(1)));
    // Another tenant's lead is not matched.
    let (_, r) = app
        .post(
            "/api/ingest/batches",
            Some(&t.b_token),
            json!({ "entity": "crm.lead", "mode": "upsert", "idempotency_key": "k", "records": [{ "lead_id": lead, "name": "x" }] }),
        )
        .await;
    assert_eq!(r["data"]["errors"][0]["details"], json!([format!("lead_id {} is not a lead of this tenant", lead.as_str().unwrap())]));

    let b =
        assert_error(app.post("/api/ingest/batches", Some(a), json!({ "entity": "crm.deal", "mode": "merge", "records": [] })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "entity must be one of: crm.contact, crm.lead",
            "mode must be one of: upsert, insert",
            "idempotency_key is required",
            "records must hold 1 to 1000 items"
        ])
    );
    let b = assert_error(
        app.post("/api/ingest/batches", Some(a), json!({ "entity": "crm.lead", "mode": "insert", "idempotency_key": "k", "records": {} })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["records must be an array"]));
    let b = assert_error(
        app.post("/api/ingest/batches", Some(a), json!({ "entity": "crm.deal", "mode": "insert", "idempotency_key": "k", "records": [{}] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["entity must be one of: crm.contact, crm.lead"]));
}
db_test!(leads_are_inserted_or_updated_by_lead_id);

async fn batches_are_listed_and_read_with_their_results_and_provenance(app: TestApp) {
    let t = app.two_tenants("ingest-read").await;
    let a = t.a_token.as_str();
    let contacts = json!({
        "entity": "crm.contact", "mode": "insert", "idempotency_key": "contacts-1",
        "records": [{ "name": "Bo", "emails": ["bo@example.com"] }, "not an object", { "name": "Cy", "emails": ["cy@example.com"] }]
    });
    let (s, first) = app.post("/api/ingest/batches", Some(a), contacts).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let (s, second) = app
        .post("/api/ingest/batches", Some(a), json!({ "entity": "crm.lead", "mode": "upsert", "idempotency_key": "leads-1", "records": [{ "name": "Lead" }] }))
        .await;
    assert_eq!(s, StatusCode::OK, "{second}");
    let first_id = first["data"]["batch_id"].as_str().unwrap();

    let (s, list) = app.get("/api/ingest/batches", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)), "{list}");
    let rows: Vec<(&str, &str, i64, i64)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["idempotency_key"].as_str().unwrap(), b["entity"].as_str().unwrap(), b["record_count"].as_i64().unwrap(), b["imported"].as_i64().unwrap()))
        .collect();
    assert_eq!(rows, [("leads-1", "crm.lead", 1, 1), ("contacts-1", "crm.contact", 3, 2)]);
    assert!(list["data"][0].get("results").is_none(), "the list carries no results: {list}");
    for (query, key) in [("entity=crm.contact", "contacts-1"), ("mode=upsert", "leads-1"), ("idempotency_key=contacts-1", "contacts-1")] {
        let (_, one) = app.get(&format!("/api/ingest/batches?{query}"), Some(a)).await;
        assert_eq!((one["total"].as_i64(), one["data"][0]["idempotency_key"].as_str()), (Some(1), Some(key)), "{query}: {one}");
    }
    let (_, page) = app.get("/api/ingest/batches?limit=1&offset=1", Some(a)).await;
    assert_eq!((page["total"].as_i64(), page["data"][0]["batch_id"].as_str()), (Some(2), Some(first_id)));
    let b = assert_error(app.get("/api/ingest/batches?entity=crm.deal&mode=merge", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"].as_array().unwrap().len(), 2, "{b}");
    let (_, b_list) = app.get("/api/ingest/batches", Some(&t.b_token)).await;
    assert_eq!(b_list["total"], 0);

    let (s, one) = app.get(&format!("/api/ingest/batches/{first_id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    let d = &one["data"];
    assert_eq!(
        (d["idempotency_key"].as_str(), d["entity"].as_str(), d["mode"].as_str(), d["record_count"].as_i64(), d["imported"].as_i64(), d["skipped"].as_i64()),
        (Some("contacts-1"), Some("crm.contact"), Some("insert"), Some(3), Some(2), Some(0))
    );
    assert_eq!((&d["errors"], &d["results"]), (&first["data"]["errors"], &first["data"]["results"]), "the results as the batch answered them");
    let provenance = d["provenance"].as_array().unwrap();
    assert_eq!(provenance.iter().map(|p| p["record_index"].as_i64().unwrap()).collect::<Vec<_>>(), [0, 2]);
    assert_eq!(provenance[0]["entity_id"], first["data"]["results"][0]["id"]);
    assert_eq!(provenance[1]["outcome"], "inserted");
    let hash = hub_kernel::crypto::sha256_hex(json!({ "name": "Bo", "emails": ["bo@example.com"] }).to_string().as_bytes());
    assert_eq!(provenance[0]["record_hash"].as_str(), Some(hash.as_str()), "the SHA-256 of the record as received");
    assert_error(app.get(&format!("/api/ingest/batches/{first_id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/ingest/batches/0190a000-0000-7000-8000-000000000000", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/ingest/batches/contacts-1", Some(a)).await, 404, "NotFound");
}
db_test!(batches_are_listed_and_read_with_their_results_and_provenance);
