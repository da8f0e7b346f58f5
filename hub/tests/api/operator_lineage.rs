//! Operator lineage backfill: dry runs, batches, the checkpoint per
//! (pool_index, event_type).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const OPS: &str = "test-ops-token";
const PARSED: &str = "parsing.field.extracted.v1";

async fn backfill(app: &TestApp, body: Value) -> Value {
    let (s, r) = app.operator(OPS, Method::POST, "/admin/lineage/backfill", Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    r["data"].clone()
}

async fn records(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM lineage_record").fetch_one(&app.state().db.read).await.unwrap()
}

/// (scanned, backfilled, already_present, complete) of one pair.
fn pair(counts: &Value, event_type: &str) -> (i64, i64, i64, bool) {
    let c = counts["checkpoints"].as_array().unwrap().iter().find(|c| c["event_type"] == event_type && c["pool_index"] == 0).unwrap();
    (c["scanned"].as_i64().unwrap(), c["backfilled"].as_i64().unwrap(), c["already_present"].as_i64().unwrap(), c["complete"].as_bool().unwrap())
}

async fn lineage_entries_are_backfilled_in_batches_from_a_checkpoint(app: TestApp) {
    let a = app.signup("lin@example.com", "lin").await;
    let t = a["token"].as_str().unwrap();
    for n in 0..3 {
        app.append(t, 0, PARSED, json!({ "field": n })).await;
    }
    app.append(t, 0, "semantic.intent.planned.v1", json!({ "intent": "x" })).await;
    app.append(t, 0, "crm.call.logged.v1", json!({ "not": "lineage" })).await;

    let post = |body: Value| app.operator(OPS, Method::POST, "/admin/lineage/backfill", Some(body));
    let b = assert_error(
        post(json!({ "pool_index": -1, "event_type": "crm.call.logged.v1", "batch_size": 0, "dry_run": "yes", "from": "soon" })).await,
        400,
        "ValidationError",
    )
    .clone();
    assert_eq!(
        b["details"],
        json!([
            "pool_index must be an integer from 0 to 2147483647",
            "event_type must be one of: parsing.field.extracted.v1, recommendation.suggestion.generated.v1, semantic.intent.planned.v1, ai-gateway.complete.v1",
            "batch_size must be an integer of at least 1",
            "dry_run must be true or false",
            "from must be an RFC 3339 timestamp"
        ])
    );
    let b = assert_error(post(json!({ "from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["from must not be after to"]));

    // A dry run counts and writes nothing.
    let dry = backfill(&app, json!({ "event_type": PARSED, "batch_size": 2, "dry_run": true })).await;
    assert_eq!((dry["dry_run"].as_bool(), pair(&dry, PARSED)), (Some(true), (2, 2, 0, false)));
    assert_eq!(dry["checkpoints"].as_array().unwrap().len(), 1, "one pool, one type");
    assert_eq!(records(&app).await, 0);
    let again = backfill(&app, json!({ "event_type": PARSED, "batch_size": 2, "dry_run": true })).await;
    assert_eq!(again["checkpoints"], dry["checkpoints"], "a dry run moves no checkpoint");

    // Batches resume from the checkpoint.
    let first = backfill(&app, json!({ "event_type": PARSED, "batch_size": 2 })).await;
    assert_eq!(pair(&first, PARSED), (2, 2, 0, false));
    assert_eq!(first["checkpoints"], dry["checkpoints"], "the dry run reported what the run did");
    assert_eq!(records(&app).await, 2);
    let rest = backfill(&app, json!({})).await;
    assert_eq!((pair(&rest, PARSED), pair(&rest, "semantic.intent.planned.v1")), ((1, 1, 0, true), (1, 1, 0, true)));
    assert_eq!((rest["scanned"].as_i64(), rest["backfilled"].as_i64(), rest["complete"].as_bool()), (Some(2), Some(2), Some(true)));
    assert_eq!(rest["checkpoints"].as_array().unwrap().len(), 4, "every type of every pool");
    assert_eq!(records(&app).await, 4);
    let done = backfill(&app, json!({})).await;
    assert_eq!((done["scanned"].as_i64(), done["complete"].as_bool()), (Some(0), Some(true)));
    assert_eq!(pair(&done, PARSED).0, 0);
    assert_eq!(done["checkpoints"][0]["last_entry_id"], rest["checkpoints"][0]["last_entry_id"]);

    // A new entry is picked up after the checkpoint; a rewound checkpoint finds records present.
    app.append(t, 0, PARSED, json!({ "field": 3 })).await;
    assert_eq!(pair(&backfill(&app, json!({ "event_type": PARSED })).await, PARSED), (1, 1, 0, true));
    sqlx::query("DELETE FROM lineage_checkpoint WHERE event_type = $1").bind(PARSED).execute(app.state().db.writer()).await.unwrap();
    assert_eq!(pair(&backfill(&app, json!({ "event_type": PARSED })).await, PARSED), (4, 0, 4, true));
    let digest: String = sqlx::query_scalar("SELECT payload_digest FROM lineage_record LIMIT 1").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(digest.len(), 64, "the entry's payload digest, hex");

    // A window, and an unknown pool: zero counts.
    sqlx::query("DELETE FROM lineage_checkpoint").execute(app.state().db.writer()).await.unwrap();
    let past = backfill(&app, json!({ "to": "2020-01-01T00:00:00Z", "dry_run": true })).await;
    assert_eq!((past["scanned"].as_i64(), past["complete"].as_bool()), (Some(0), Some(true)));
    let unknown = backfill(&app, json!({ "pool_index": 7 })).await;
    assert_eq!((unknown["scanned"].as_i64(), unknown["checkpoints"].clone()), (Some(0), json!([])));
    // An empty body is every default.
    let (s, _) = app.operator(OPS, Method::POST, "/admin/lineage/backfill", None).await;
    assert_eq!(s, StatusCode::OK);

    let runs = app.platform_events().await.into_iter().filter(|(e, _)| e == "audit.lineage.backfilled.v1").count();
    assert_eq!(runs, 7, "every run but the dry ones");
}
db_test!(lineage_entries_are_backfilled_in_batches_from_a_checkpoint);
