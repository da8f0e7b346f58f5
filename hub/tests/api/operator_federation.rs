//! Operator federation profiles (fields decided by the project).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const OPS: &str = "test-ops-token";

async fn post(app: &TestApp, path: &str, body: Value) -> (StatusCode, Value) {
    app.operator(OPS, Method::POST, path, Some(body)).await
}

async fn federation_profiles_join_regions_a_terminal_one_only_as_a_peer(app: TestApp) {
    let region = |id: &str, terminal: bool| json!({ "region_id": id, "regime": "eu-sovereign", "operator_partner": "p", "kms_provider": "k", "operator_id": "o", "terminal_federation": terminal });
    for (id, terminal) in [("eu-sov-1", false), ("eu-sov-end", true)] {
        let (s, _) = post(&app, "/admin/sovereign/regions", region(id, terminal)).await;
        assert_eq!(s, StatusCode::OK);
    }
    let profiles = "/admin/federation/profiles";
    let b = assert_error(
        post(&app, profiles, json!({ "name": "Bad Name", "peer_regions": [], "shared_data_classes": ["secret"], "failover_mode": "auto", "probe_interval_seconds": 1, "failure_threshold": 0 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "home_region is required",
            "peer_regions must hold 1 to 20 items",
            "shared_data_classes[0] must be one of: open, restricted, sovereign",
            "failover_mode must be one of: manual, automatic",
            "probe_interval_seconds must be an integer from 5 to 3600",
            "failure_threshold must be an integer from 1 to 100"
        ])
    );
    // What the schema cannot say, once the body matches it.
    let b = assert_error(
        post(
            &app,
            profiles,
            json!({ "name": "Bad Name", "home_region": "us-east-1", "peer_regions": ["eu-west-1", " "], "shared_data_classes": ["open", "open"] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "name must be 1 to 100 of a-z, 0-9, '.', '_' or '-'",
            "peer_regions must hold distinct strings of 1 to 64 characters",
            "shared_data_classes must hold distinct classes"
        ])
    );
    let b = assert_error(
        post(&app, profiles, json!({ "name": "x", "home_region": "us-east-1", "peer_regions": ["us-east-1", "us-east-1"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["peer_regions must hold distinct strings of 1 to 64 characters"]));
    let b = assert_error(
        post(&app, profiles, json!({ "name": "x", "home_region": "eu-sov-end", "peer_regions": ["mars-1", "eu-west-1"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "home_region eu-sov-end is terminal: it may not federate onward",
            "mars-1 is neither a region (us-east-1, us-west-2, eu-west-1, ap-south-1) nor a registered sovereign region"
        ])
    );
    let b = assert_error(
        post(&app, profiles, json!({ "name": "x", "home_region": "eu-sov-1", "peer_regions": ["eu-west-1"], "shared_data_classes": ["sovereign"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["the sovereign data class is shared only among sovereign regions"]));

    let (s, p) = post(&app, profiles, json!({ "name": "eu-core", "home_region": "eu-west-1", "peer_regions": ["eu-sov-1", "eu-sov-end"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    assert_eq!(
        (
            p["data"]["shared_data_classes"].clone(),
            p["data"]["failover_mode"].as_str(),
            p["data"]["probe_interval_seconds"].as_i64(),
            p["data"]["failure_threshold"].as_i64()
        ),
        (json!(["open"]), Some("manual"), Some(30), Some(3)),
        "the defaults"
    );
    assert_eq!((p["data"]["status"].as_str(), p["data"]["created_by"].as_str()), (Some("active"), Some("break-glass")));
    let sovereign = json!({
        "name": "sov-ring", "home_region": "eu-sov-1", "peer_regions": ["eu-sov-end"], "shared_data_classes": ["sovereign", "restricted"],
        "failover_mode": "automatic", "probe_interval_seconds": 5, "failure_threshold": 100,
    });
    let (s, q) = post(&app, profiles, sovereign.clone()).await;
    assert_eq!((s, q["data"]["shared_data_classes"].clone()), (StatusCode::CREATED, json!(["sovereign", "restricted"])));
    assert_error(post(&app, profiles, sovereign).await, 409, "Conflict");

    let (s, list) = app.operator(OPS, Method::GET, profiles, None).await;
    assert_eq!(s, StatusCode::OK);
    let names: Vec<&str> = list["data"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sov-ring", "eu-core"], "newest first");
    let created = app.platform_events().await.into_iter().filter(|(e, _)| e == "security.federation_profile.created.v1").count();
    assert_eq!(created, 2);
}
db_test!(federation_profiles_join_regions_a_terminal_one_only_as_a_peer);

async fn the_federation_list_holds_at_most_200(app: TestApp) {
    let now = hub_kernel::db::now();
    for n in 0..205 {
        sqlx::query(
            "INSERT INTO federation_profile (profile_id, name, home_region, peer_regions, shared_data_classes, failover_mode, probe_interval_seconds, \
             failure_threshold, status, created_by, created_at, updated_at) VALUES ($1, $2, 'us-east-1', '[\"eu-west-1\"]', '[\"open\"]', 'manual', 30, 3, 'active', 'test', $3, $3)",
        )
        .bind(uuid::Uuid::now_v7().to_string())
        .bind(format!("p{n}"))
        .bind(&now)
        .execute(app.state().db.writer())
        .await
        .unwrap();
    }
    let (s, list) = app.operator(OPS, Method::GET, "/admin/federation/profiles", None).await;
    assert_eq!((s, list["data"].as_array().unwrap().len()), (StatusCode::OK, 200));
}
db_test!(the_federation_list_holds_at_most_200);
