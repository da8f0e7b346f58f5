//! Operator "On-prem installs": installs, billing reports, bundles.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const OPS: &str = "test-ops-token";

async fn post(app: &TestApp, path: &str, body: Value) -> (StatusCode, Value) {
    app.operator(OPS, Method::POST, path, Some(body)).await
}

async fn installs_are_registered_reported_on_and_updated_by_bundles(app: TestApp) {
    let b = assert_error(
        post(&app, "/admin/onprem/installs", json!({ "k8s_distribution": "k3s", "air_gap_mode": "open", "billing_mode": "free" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "customer_id is required",
            "cluster_name is required",
            "k8s_distribution must be one of: vanilla, openshift, rancher, tanzu",
            "installed_version is required",
            "air_gap_mode must be one of: strict, diode-in, diode-bidi",
            "billing_mode must be one of: internal-report-only, flat-fee, per-incident"
        ])
    );
    let body = json!({ "customer_id": "acme", "cluster_name": "prod-eu", "k8s_distribution": "openshift", "installed_version": "4.1.0" });
    let (s, i) = post(&app, "/admin/onprem/installs", body.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{i}");
    assert_eq!((i["data"]["air_gap_mode"].as_str(), i["data"]["billing_mode"].as_str()), (Some("strict"), Some("internal-report-only")));
    let (s, twin) = post(&app, "/admin/onprem/installs", body.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "not idempotent");
    assert_ne!(twin["data"]["install_id"], i["data"]["install_id"]);
    let id = i["data"]["install_id"].as_str().unwrap().to_string();
    let (s, r) = app.operator(OPS, Method::GET, &format!("/admin/onprem/installs/{id}"), None).await;
    assert_eq!((s, r["data"].clone()), (StatusCode::OK, i["data"].clone()));
    for missing in ["0190a000-0000-7000-8000-000000000000", "nope"] {
        let b = assert_error(app.operator(OPS, Method::GET, &format!("/admin/onprem/installs/{missing}"), None).await, 404, "NotFound");
        assert_eq!(b["details"], json!(["install not found"]));
    }

    // Billing reports: every generation appends one.
    let reports = format!("/admin/onprem/installs/{id}/billing-reports");
    let b = assert_error(post(&app, &reports, json!({ "period_start": "2026-02-01", "period_end": "2026-01-31" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["artifact_local_path is required"]));
    let b = assert_error(
        post(&app, &reports, json!({ "period_start": "2026-02-01", "period_end": "2026-01-31", "artifact_local_path": "/r" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["period_end must be on or after period_start"]));
    let b = assert_error(post(&app, &reports, json!({ "period_start": "Feb", "artifact_local_path": "/r" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["period_start must be a day, YYYY-MM-DD", "period_end is required"]));
    let report = json!({ "period_start": "2026-01-01", "period_end": "2026-01-31", "artifact_local_path": "/var/lib/hub/reports/2026-01.json" });
    let (s, r1) = post(&app, &reports, report.clone()).await;
    assert_eq!((s, r1["data"]["period_end"].as_str()), (StatusCode::CREATED, Some("2026-01-31")), "{r1}");
    let (s, r2) = post(&app, &reports, report.clone()).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_ne!(r1["data"]["report_id"], r2["data"]["report_id"]);
    let b = assert_error(post(&app, "/admin/onprem/installs/0190a000-0000-7000-8000-000000000000/billing-reports", report).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["install not found"]));
    // 404 before the body is looked at.
    let b = assert_error(post(&app, "/admin/onprem/installs/0190a000-0000-7000-8000-000000000000/billing-reports", json!({})).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["install not found"]));

    // Bundles: signature_verified is a real boolean; a verified one moves the version.
    let bundles = format!("/admin/onprem/installs/{id}/bundles");
    let b = assert_error(post(&app, &bundles, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["bundle_version is required", "signature_verified is required"]));
    for not_bool in [json!("true"), json!(1)] {
        let b = assert_error(post(&app, &bundles, json!({ "bundle_version": "4.2.0", "signature_verified": not_bool })).await, 400, "ValidationError");
        assert_eq!(b["details"], json!(["signature_verified must be true or false"]));
    }
    let b = assert_error(
        post(&app, &bundles, json!({ "bundle_version": "4.2.0", "signature_verified": true, "migrations_applied": [{ "sdk": "crm" }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["migrations_applied[0].filename is required"]));
    let b = assert_error(
        post(
            &app,
            &bundles,
            json!({ "bundle_version": "4.2.0", "signature_verified": true, "migrations_applied": [{ "sdk": " ", "filename": "x".repeat(201) }] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["migrations_applied[0].sdk is required", "migrations_applied[0].filename must be at most 200 characters"]));
    let (s, unverified) = post(&app, &bundles, json!({ "bundle_version": "4.2.0", "signature_verified": false })).await;
    assert_eq!(s, StatusCode::CREATED, "{unverified}");
    assert_eq!((unverified["data"]["signature_verified"].as_bool(), unverified["data"]["migrations_applied"].clone()), (Some(false), json!([])));
    let (_, r) = app.operator(OPS, Method::GET, &format!("/admin/onprem/installs/{id}"), None).await;
    assert_eq!(r["data"]["installed_version"], "4.1.0", "an unverified bundle moves nothing");
    let applied = json!([{ "sdk": "crm", "filename": "0043_crm.sql" }]);
    let (s, verified) = post(&app, &bundles, json!({ "bundle_version": "4.2.0", "signature_verified": true, "migrations_applied": applied })).await;
    assert_eq!((s, verified["data"]["migrations_applied"].clone()), (StatusCode::CREATED, applied));
    let (_, r) = app.operator(OPS, Method::GET, &format!("/admin/onprem/installs/{id}"), None).await;
    assert_eq!(r["data"]["installed_version"], "4.2.0");
    assert_error(post(&app, "/admin/onprem/installs/nope/bundles", json!({ "bundle_version": "1", "signature_verified": true })).await, 404, "NotFound");
    assert_error(post(&app, "/admin/onprem/installs/0190a000-0000-7000-8000-000000000000/bundles", json!({})).await, 404, "NotFound");

    let events: Vec<String> = app.platform_events().await.into_iter().map(|(e, _)| e).collect();
    for (event, n) in
        [("security.onprem_install.registered.v1", 2), ("security.onprem_billing_report.generated.v1", 2), ("security.onprem_bundle.applied.v1", 2)]
    {
        assert_eq!(events.iter().filter(|e| *e == event).count(), n, "{event}");
    }
}
db_test!(installs_are_registered_reported_on_and_updated_by_bundles);
