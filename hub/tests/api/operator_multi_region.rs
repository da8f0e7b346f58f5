//! Operator "Multi-region": active-active profiles and failover drills.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const OPS: &str = "test-ops-token";

async fn post(app: &TestApp, path: &str, body: Value) -> (StatusCode, Value) {
    app.operator(OPS, Method::POST, path, Some(body)).await
}

async fn a_profile_is_created_read_and_drilled_each_drill_audited(app: TestApp) {
    let tenant = app.signup("aa@example.com", "aa").await;
    let tenant_id = tenant["tenant_id"].as_str().unwrap().to_string();
    let profile = json!({
        "tenant_id": tenant_id, "home_region": "us-east-1", "paired_regions": ["eu-west-1"], "contract_addendum_ref": "add-7",
        "rpo_target_seconds": 60, "rto_target_seconds": 0, "replication_overrides": { "billing": "sync", "search": "single-region" },
    });

    // Validation: every problem in one answer.
    let b = assert_error(
        post(&app, "/admin/active-active/profiles", json!({ "paired_regions": "eu-west-1", "rpo_target_seconds": -1 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "tenant_id is required",
            "home_region is required",
            "paired_regions must be an array",
            "contract_addendum_ref is required",
            "rpo_target_seconds must be an integer from 0 to 2592000"
        ])
    );
    let bad = json!({
        "tenant_id": "nope", "home_region": "mars-1", "paired_regions": ["us-east-1", "x"], "contract_addendum_ref": "a",
        "replication_overrides": { "billing": "eventually" },
    });
    let b = assert_error(post(&app, "/admin/active-active/profiles", bad).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "tenant_id must be a UUID",
            "home_region must be one of: us-east-1, us-west-2, eu-west-1, ap-south-1",
            "paired_regions[1] must be one of: us-east-1, us-west-2, eu-west-1, ap-south-1",
            "replication_overrides.billing must be one of: sync, async, single-region"
        ])
    );
    let mut twice = profile.clone();
    twice["paired_regions"] = json!(["eu-west-1", "eu-west-1"]);
    twice["replication_overrides"] = json!({ " ": "sync" });
    let b = assert_error(post(&app, "/admin/active-active/profiles", twice).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["paired_regions names eu-west-1 twice", "replication_overrides service names must be 1 to 100 characters"]));
    let mut own = profile.clone();
    own["paired_regions"] = json!(["us-east-1"]);
    let b = assert_error(post(&app, "/admin/active-active/profiles", own).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["paired_regions must not contain the home_region"]));
    let mut unknown = profile.clone();
    unknown["tenant_id"] = json!("0190a000-0000-7000-8000-000000000000");
    let b = assert_error(post(&app, "/admin/active-active/profiles", unknown).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id names no tenant"]));

    let (s, p) = post(&app, "/admin/active-active/profiles", profile.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let p = &p["data"];
    assert_eq!(
        (p["tier"].as_str(), p["status"].as_str(), p["paired_regions"].clone(), p["rpo_target_seconds"].as_i64()),
        (Some("active-active"), Some("active"), json!(["eu-west-1"]), Some(60))
    );
    assert_eq!(p["activated_at"], p["created_at"]);
    let profile_id = p["profile_id"].as_str().unwrap().to_string();
    assert_error(post(&app, "/admin/active-active/profiles", profile.clone()).await, 409, "Conflict");

    let (s, v) = app.operator(OPS, Method::GET, &format!("/admin/active-active/profiles/{tenant_id}"), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["data"]["profile"]["profile_id"], json!(profile_id));
    assert_eq!(
        v["data"]["replication_streams"],
        json!([
            { "service": "*", "source_region": "us-east-1", "target_region": "eu-west-1", "mode": "async" },
            { "service": "billing", "source_region": "us-east-1", "target_region": "eu-west-1", "mode": "sync" },
        ])
    );
    for missing in ["0190a000-0000-7000-8000-000000000000", "not-a-uuid"] {
        let b = assert_error(app.operator(OPS, Method::GET, &format!("/admin/active-active/profiles/{missing}"), None).await, 404, "NotFound");
        assert_eq!(b["details"], json!(["no profile for tenant"]));
    }

    // Drills: validated, then each one moves the traffic and is audited.
    let drills = format!("/admin/active-active/profiles/{profile_id}/drills");
    let b = assert_error(post(&app, &drills, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["to_region is required"]));
    let b = assert_error(post(&app, &drills, json!({ "to_region": "mars-1", "from_region": "" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "to_region must be one of: us-east-1, us-west-2, eu-west-1, ap-south-1",
            "from_region must be one of: us-east-1, us-west-2, eu-west-1, ap-south-1"
        ])
    );
    // An unknown profile is 404 before its body is looked at.
    let b = assert_error(post(&app, "/admin/active-active/profiles/0190a000-0000-7000-8000-000000000000/drills", json!({})).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["profile not found"]));
    let b = assert_error(post(&app, &drills, json!({ "to_region": "ap-south-1" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["to_region must be one of the profile's paired regions (eu-west-1)"]));
    assert_error(post(&app, &drills, json!({ "to_region": "eu-west-1", "from_region": "eu-west-1" })).await, 409, "Conflict");
    let b = assert_error(
        post(&app, "/admin/active-active/profiles/0190a000-0000-7000-8000-000000000000/drills", json!({ "to_region": "eu-west-1" })).await,
        404,
        "NotFound",
    );
    assert_eq!(b["details"], json!(["profile not found"]));

    // An RTO target of 0 s cannot be met: the drill fails and downgrades the tier.
    let (s, d) = post(&app, &drills, json!({ "to_region": "eu-west-1" })).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    let d = d["data"].clone();
    assert_eq!((d["from_region"].as_str(), d["to_region"].as_str()), (Some("us-east-1"), Some("eu-west-1")));
    assert_eq!((d["passed"].as_bool(), d["tier_downgrade_triggered"].as_bool()), (Some(false), Some(true)));
    let (rpo, rto) = (d["rpo_observed_seconds"].as_f64().unwrap(), d["rto_observed_seconds"].as_f64().unwrap());
    assert!(rto > 0.0 && rpo <= rto && rto < 30.0, "{d}");
    let entry: (String, String, String) = sqlx::query_as("SELECT tenant_id, event_type, actor_id FROM audit_entry WHERE entry_id = $1")
        .bind(d["audit_entry_id"].as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(entry, (tenant_id.clone(), "tenant.failover_drill.completed.v1".to_string(), "break-glass".to_string()));
    let (_, v) = app.operator(OPS, Method::GET, &format!("/admin/active-active/profiles/{tenant_id}"), None).await;
    let moved = &v["data"]["profile"];
    assert_eq!((moved["home_region"].as_str(), moved["paired_regions"].clone()), (Some("eu-west-1"), json!(["us-east-1"])));
    assert_eq!(moved["tier"], "active-passive");
    // Back again: not idempotent, a new drill; no further downgrade.
    let (s, back) = post(&app, &drills, json!({ "to_region": "us-east-1", "from_region": "eu-west-1" })).await;
    assert_eq!(s, StatusCode::CREATED, "{back}");
    assert_ne!(back["data"]["drill_id"], d["drill_id"]);
    assert_eq!(back["data"]["tier_downgrade_triggered"], false);

    // A profile whose targets are met passes.
    let other = app.signup("ab@example.com", "ab").await;
    let (_, p) = post(&app,
        "/admin/active-active/profiles",
        json!({ "tenant_id": other["tenant_id"], "home_region": "us-west-2", "paired_regions": ["ap-south-1", "eu-west-1"], "contract_addendum_ref": "add-8", "rto_target_seconds": 60 }),
    )
    .await;
    let (s, ok) =
        post(&app, &format!("/admin/active-active/profiles/{}/drills", p["data"]["profile_id"].as_str().unwrap()), json!({ "to_region": "ap-south-1" })).await;
    assert_eq!(s, StatusCode::CREATED, "{ok}");
    assert_eq!((ok["data"]["passed"].as_bool(), ok["data"]["tier_downgrade_triggered"].as_bool()), (Some(true), Some(false)));
    // No paired region: a single-region profile with no streams.
    let third = app.signup("ac@example.com", "ac").await;
    let (s, p) = post(
        &app,
        "/admin/active-active/profiles",
        json!({ "tenant_id": third["tenant_id"], "home_region": "eu-west-1", "paired_regions": [], "contract_addendum_ref": "x" }),
    )
    .await;
    assert_eq!((s, p["data"]["tier"].as_str()), (StatusCode::CREATED, Some("single-region")));
    let (_, v) = app.operator(OPS, Method::GET, &format!("/admin/active-active/profiles/{}", third["tenant_id"].as_str().unwrap()), None).await;
    assert_eq!(v["data"]["replication_streams"], json!([]));

    let events = app.events_of(&json!(tenant_id)).await;
    assert_eq!(events.iter().filter(|e| *e == "tenant.active_active_profile.created.v1").count(), 1);
    assert_eq!(events.iter().filter(|e| *e == "tenant.failover_drill.completed.v1").count(), 2);
}
db_test!(a_profile_is_created_read_and_drilled_each_drill_audited);
