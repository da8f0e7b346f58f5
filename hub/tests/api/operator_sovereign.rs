//! Operator "Sovereign regions": regions, attestations, Ed25519-signed
//! bundle releases and their application, leak alerts.

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const OPS: &str = "test-ops-token";

async fn post(app: &TestApp, path: &str, body: Value) -> (StatusCode, Value) {
    app.operator(OPS, Method::POST, path, Some(body)).await
}

fn release_key() -> Ed25519KeyPair {
    Ed25519KeyPair::from_seed_unchecked(&[7u8; 32]).unwrap()
}

fn sign(key: &Ed25519KeyPair, artifact: &str, version: &str) -> String {
    hex::encode(key.sign(hub_operator::sovereign::bundle_message(artifact, version).as_bytes()).as_ref())
}

async fn regions_are_registered_attested_released_to_and_alerted(app: TestApp) {
    let key = release_key();
    let public = hex::encode(key.public_key().as_ref());
    let app = app.variant(|c| c.sovereign_bundle_public_key = Some(public)).await;
    let region =
        json!({ "region_id": "de-sov-1", "regime": "eu-sovereign", "operator_partner": "T-Systems", "kms_provider": "hsm-pkcs11", "operator_id": "ops-ada" });

    let b = assert_error(post(&app, "/admin/sovereign/regions", json!({ "region_id": "DE 1", "regime": "gdpr" })).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "regime must be one of: fedramp-high, il5, pipl, eu-sovereign, uae-trd",
            "operator_partner is required",
            "kms_provider is required",
            "operator_id is required"
        ])
    );
    // The characters of a region_id, once the body matches its schema.
    let mut bad_id = region.clone();
    bad_id["region_id"] = json!("DE 1");
    let b = assert_error(post(&app, "/admin/sovereign/regions", bad_id).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["region_id must be 1 to 64 of a-z, 0-9 or '-'"]));
    let (s, r) = post(&app, "/admin/sovereign/regions", region.clone()).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["attestation_state"].as_str(), r["data"]["terminal_federation"].as_bool(), r["data"]["attested_until"].clone()),
        (Some("in-progress"), Some(false), Value::Null)
    );
    // Re-posting updates (no 409); an omitted terminal_federation keeps its value.
    let mut terminal = region.clone();
    terminal["terminal_federation"] = json!(true);
    let (s, _) = post(&app, "/admin/sovereign/regions", terminal).await;
    assert_eq!(s, StatusCode::OK);
    let mut renamed = region.clone();
    renamed["operator_partner"] = json!("Delos");
    let (s, r) = post(&app, "/admin/sovereign/regions", renamed).await;
    assert_eq!((s, r["data"]["operator_partner"].as_str(), r["data"]["terminal_federation"].as_bool()), (StatusCode::OK, Some("Delos"), Some(true)));
    let (_, r) = post(
        &app,
        "/admin/sovereign/regions",
        json!({ "region_id": "cn-sov-1", "regime": "pipl", "operator_partner": "p", "kms_provider": "k", "operator_id": "o" }),
    )
    .await;
    assert_eq!(r["data"]["region_id"], "cn-sov-1");
    let (s, list) = app.operator(OPS, Method::GET, "/admin/sovereign/regions", None).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|r| r["region_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["cn-sov-1", "de-sov-1"]);

    // Attestations move the state; an expired one reads as expired.
    let b = assert_error(
        post(&app, "/admin/sovereign/regions/de-sov-1/attestations", json!({ "issued_at": "yesterday", "expires_at": "2020-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["regime is required", "auditor_id is required", "issued_at must be an RFC 3339 timestamp", "artifact_ref is required"]));
    let good = json!({ "regime": "eu-sovereign", "auditor_id": "bsi-7", "issued_at": "2026-01-01T00:00:00Z", "expires_at": "2099-01-01T00:00:00Z", "artifact_ref": "s3://att/1.pdf" });
    let mut reversed = good.clone();
    reversed["expires_at"] = json!("2025-01-01T00:00:00Z");
    let b = assert_error(post(&app, "/admin/sovereign/regions/de-sov-1/attestations", reversed).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["expires_at must be after issued_at"]));
    let mut wrong = good.clone();
    wrong["regime"] = json!("il5");
    let b = assert_error(post(&app, "/admin/sovereign/regions/de-sov-1/attestations", wrong).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["regime must be the region's (eu-sovereign)"]));
    let b = assert_error(post(&app, "/admin/sovereign/regions/xx-none/attestations", good.clone()).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["region not found"]));
    // 404 before the body is looked at.
    let b = assert_error(post(&app, "/admin/sovereign/regions/xx-none/attestations", json!({})).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["region not found"]));
    let (s, a) = post(&app, "/admin/sovereign/regions/de-sov-1/attestations", good.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    assert_eq!((a["data"]["auditor_id"].as_str(), a["data"]["expires_at"].as_str()), (Some("bsi-7"), Some("2099-01-01T00:00:00.000000Z")));
    let (s, _) = post(
        &app,
        "/admin/sovereign/regions/cn-sov-1/attestations",
        json!({ "regime": "pipl", "auditor_id": "a", "issued_at": "2020-01-01T00:00:00Z", "expires_at": "2021-01-01T00:00:00Z", "artifact_ref": "r" }),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, list) = app.operator(OPS, Method::GET, "/admin/sovereign/regions", None).await;
    let states: Vec<&str> = list["data"].as_array().unwrap().iter().map(|r| r["attestation_state"].as_str().unwrap()).collect();
    assert_eq!(states, ["expired", "attested"]);

    // Bundle releases: the signature must verify with the configured key.
    let bundles = "/admin/sovereign/regions/de-sov-1/bundles";
    let signature = sign(&key, "oci://bundles/sov:4.2.0", "4.2.0");
    let b = assert_error(post(&app, bundles, json!({ "signature_hex": "zz" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["version is required", "bundle_artifact_ref is required"]));
    let b = assert_error(
        post(&app, bundles, json!({ "version": "4.2.0", "bundle_artifact_ref": "oci://bundles/sov:4.2.0", "signature_hex": "zz" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["signature_hex must be 128 hexadecimal characters (an Ed25519 signature)"]));
    let b = assert_error(
        post(&app, bundles, json!({ "version": "4.2.0", "bundle_artifact_ref": "oci://bundles/sov:4.2.0", "signature_hex": &signature[..100] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["signature_hex must be 128 hexadecimal characters (an Ed25519 signature)"]));
    // Signed for another version, or by another key: refused.
    let forged =
        [sign(&key, "oci://bundles/sov:4.2.0", "4.2.1"), sign(&Ed25519KeyPair::from_seed_unchecked(&[8u8; 32]).unwrap(), "oci://bundles/sov:4.2.0", "4.2.0")];
    for bad in forged {
        let b = assert_error(
            post(&app, bundles, json!({ "version": "4.2.0", "bundle_artifact_ref": "oci://bundles/sov:4.2.0", "signature_hex": bad })).await,
            400,
            "ValidationError",
        );
        assert!(b["details"][0].as_str().unwrap().starts_with("signature_hex does not verify"), "{b}");
    }
    let body = json!({ "version": "4.2.0", "bundle_artifact_ref": "oci://bundles/sov:4.2.0", "signature_hex": signature.to_uppercase() });
    let b = assert_error(post(&app, "/admin/sovereign/regions/xx-none/bundles", body.clone()).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["region not found"]));
    let b = assert_error(post(&app, "/admin/sovereign/regions/xx-none/bundles", json!({})).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["region not found"]));
    let (s, rel) = post(&app, bundles, body.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{rel}");
    assert_eq!((rel["data"]["status"].as_str(), rel["data"]["signature"].as_str()), (Some("released"), Some(signature.as_str())));
    assert_error(post(&app, bundles, body.clone()).await, 409, "Conflict");

    let release_id = rel["data"]["release_id"].as_str().unwrap();
    let (s, done) = post(&app, &format!("/admin/sovereign/bundles/{release_id}/applied"), json!({})).await;
    assert_eq!((s, done["data"]["status"].as_str()), (StatusCode::OK, Some("applied")));
    let (s, again) = app.operator(OPS, Method::POST, &format!("/admin/sovereign/bundles/{release_id}/applied"), None).await;
    assert_eq!((s, again["data"]["applied_at"].clone()), (StatusCode::OK, done["data"]["applied_at"].clone()), "a repeat changes nothing");
    for missing in ["0190a000-0000-7000-8000-000000000000", "nope"] {
        let b = assert_error(app.operator(OPS, Method::POST, &format!("/admin/sovereign/bundles/{missing}/applied"), None).await, 404, "NotFound");
        assert_eq!(b["details"], json!(["release not found"]));
    }

    // Leak alerts append.
    let leaks = "/admin/sovereign/regions/de-sov-1/leaks";
    let b = assert_error(post(&app, leaks, json!({ "kind": "exfil", "severity": "" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["kind must be one of: egress-attempt, cross-region-route, policy-violation", "severity is required"]));
    let b = assert_error(post(&app, "/admin/sovereign/regions/xx-none/leaks", json!({})).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["region not found"]));
    let (s, l1) = post(&app, leaks, json!({ "kind": "egress-attempt", "severity": "critical", "incident_ref": "INC-9" })).await;
    assert_eq!((s, l1["data"]["incident_ref"].as_str()), (StatusCode::CREATED, Some("INC-9")));
    let (s, l2) = post(&app, leaks, json!({ "kind": "egress-attempt", "severity": "critical", "incident_ref": null })).await;
    assert_eq!((s, l2["data"]["incident_ref"].clone()), (StatusCode::CREATED, Value::Null));
    assert_ne!(l1["data"]["alert_id"], l2["data"]["alert_id"]);
    assert_error(post(&app, "/admin/sovereign/regions/xx-none/leaks", json!({ "kind": "egress-attempt", "severity": "info" })).await, 404, "NotFound");

    let events: Vec<String> = app.platform_events().await.into_iter().map(|(e, _)| e).collect();
    for (event, n) in [
        ("security.sovereign_region.registered.v1", 4),
        ("security.sovereign_attestation.recorded.v1", 2),
        ("security.sovereign_bundle.released.v1", 1),
        ("security.sovereign_bundle.applied.v1", 1),
        ("security.sovereign_leak.reported.v1", 2),
    ] {
        assert_eq!(events.iter().filter(|e| *e == event).count(), n, "{event}");
    }
}
db_test!(regions_are_registered_attested_released_to_and_alerted);

async fn without_a_release_key_no_bundle_is_released(app: TestApp) {
    let (s, _) = app
        .operator(
            OPS,
            Method::POST,
            "/admin/sovereign/regions",
            Some(json!({ "region_id": "r1", "regime": "il5", "operator_partner": "p", "kms_provider": "k", "operator_id": "o" })),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let key = release_key();
    let body = json!({ "version": "1", "bundle_artifact_ref": "a", "signature_hex": sign(&key, "a", "1") });
    let b = assert_error(app.operator(OPS, Method::POST, "/admin/sovereign/regions/r1/bundles", Some(body)).await, 503, "ServiceUnavailable");
    assert!(b["details"][0].as_str().unwrap().contains("HUB_SOVEREIGN_BUNDLE_PUBLIC_KEY"), "{b}");
}
db_test!(without_a_release_key_no_bundle_is_released);
