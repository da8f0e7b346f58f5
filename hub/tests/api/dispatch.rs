//! sdk-dispatch: stops ordered by nearest neighbour and 2-opt on
//! great-circle distances, drive times from the speed setting, the route
//! stored and read back by id.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// A stop `k` hundredths of a degree east of the depot on one parallel.
fn east(k: u32) -> Value {
    json!({ "stop_id": format!("s{k}"), "label": format!("stop {k}"), "lat": 52.0, "lng": 4.0 + f64::from(k) * 0.01, "service_minutes": 4 })
}

fn close(a: &Value, b: f64, tolerance: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() <= tolerance)
}

async fn routes_are_optimised_stored_and_read_back(app: TestApp) {
    let t = app.two_tenants("dispatch").await;
    let a = t.a_token.as_str();
    let depot = json!({ "lat": 52.0, "lng": 4.0 });
    let shuffled = json!([east(3), east(1), east(5), east(2), east(4)]);
    let (s, body) = app.post("/api/dispatch/routes/optimize", Some(a), json!({ "start": depot, "stops": shuffled })).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let route = &body["data"];
    assert_eq!(route["persona_id"], t.a["persona_id"], "the caller's persona by default");
    assert_eq!(route["start"], depot);
    let stops = route["stops"].as_array().unwrap();
    let ids: Vec<&str> = stops.iter().map(|s| s["stop_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["s1", "s2", "s3", "s4", "s5"], "down the road, not in the order given");
    let indexes: Vec<u64> = stops.iter().map(|s| s["input_index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [1, 3, 0, 4, 2]);
    assert_eq!(stops.iter().map(|s| s["sequence"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    assert_eq!((stops[0]["label"].as_str(), stops[0]["service_minutes"].as_f64()), (Some("stop 1"), Some(4.0)));
    // 0.01° of longitude at 52° N is about 0.685 km: five equal legs.
    let leg = stops[0]["leg_km"].as_f64().unwrap();
    assert!((0.68..0.69).contains(&leg), "{leg}");
    assert!(stops.iter().all(|s| close(&s["leg_km"], leg, 0.001)), "{stops:?}");
    assert!(close(&route["total_km"], 5.0 * leg, 0.005), "{route}");
    assert!(route["given_order_km"].as_f64().unwrap() > route["total_km"].as_f64().unwrap() * 2.0, "{route}");
    // Drive times at the default 35 km/h; each stop's service time delays the next arrival.
    assert_eq!(route["avg_speed_kmh"], 35.0);
    let drive = route["total_km"].as_f64().unwrap() / 35.0 * 60.0;
    assert!(close(&route["drive_minutes"], drive, 0.02), "{route}");
    assert!(close(&route["total_minutes"], drive + 5.0 * 4.0, 0.02), "{route}");
    assert!(close(&stops[0]["leg_minutes"], leg / 35.0 * 60.0, 0.01));
    assert!(close(&stops[1]["arrival_minutes"], 2.0 * leg / 35.0 * 60.0 + 4.0, 0.02), "{}", stops[1]);
    assert!(route["optimized_at"].as_str().is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok()));

    let id = route["route_id"].as_str().unwrap();
    let (s, read) = app.get(&format!("/api/dispatch/routes/{id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{read}");
    assert_eq!(read["data"], *route, "stored as answered");
    assert_error(app.get(&format!("/api/dispatch/routes/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/dispatch/routes/{id}"), Some(&t.b_key)).await, 404, "NotFound");
    assert_error(app.get("/api/dispatch/routes/not-a-route", Some(a)).await, 404, "NotFound");
    let events = app.events_of(&t.a["tenant_id"]).await.into_iter().filter(|e| e == "dispatch.route.optimized.v1").count();
    assert_eq!(events, 1);

    // Without a start, the first stop given begins the route; a persona of the tenant may be named.
    let persona = t.a["persona_id"].clone();
    let (s, body) = app.post("/api/dispatch/routes/optimize", Some(a), json!({ "persona_id": persona, "stops": [east(4), east(1), east(5)] })).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let ids: Vec<&str> = body["data"]["stops"].as_array().unwrap().iter().map(|s| s["stop_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["s4", "s5", "s1"]);
    assert_eq!((body["data"]["start"].clone(), body["data"]["stops"][0]["leg_km"].as_f64()), (Value::Null, Some(0.0)));
    // One stop is a route too.
    let (s, body) = app.post("/api/dispatch/routes/optimize", Some(&t.b_key), json!({ "stops": [east(1)] })).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    assert_eq!((body["data"]["total_km"].as_f64(), body["data"]["persona_id"].is_string()), (Some(0.0), true));
}
db_test!(routes_are_optimised_stored_and_read_back);

async fn bad_routes_are_refused_with_every_problem(app: TestApp) {
    let t = app.two_tenants("dispatch-bad").await;
    let a = t.a_token.as_str();
    let bad = json!({
        "persona_id": "someone",
        "start": { "lat": 91 },
        "stops": [
            { "stop_id": "x", "lat": "52", "lng": 200 },
            { "stop_id": "x", "lat": 1, "lng": 1, "service_minutes": -1, "label": "l".repeat(201) },
        ],
    });
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), bad).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!([
            "persona_id must be a UUID",
            "start.lat must be a number from -90 to 90",
            "start.lng is required",
            "stops[0].lat must be a number from -90 to 90",
            "stops[0].lng must be a number from -180 to 180",
            "stops[1].label must be at most 200 characters",
            "stops[1].service_minutes must be a number from 0 to 1440",
        ])
    );
    // What the schema cannot say comes once the body matches it.
    let twice = json!({ "stops": [{ "stop_id": "x", "lat": 1, "lng": 1 }, { "stop_id": " x ", "lat": 1, "lng": 2 }] });
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), twice).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["stops[1].stop_id 'x' is given more than once"]));
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["stops is required"]));
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), json!({ "stops": [] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["stops must hold 1 to 250 items"]));
    let many: Vec<Value> = (0..251).map(|i| json!({ "lat": 52.0, "lng": 4.0 + f64::from(i) * 0.001 })).collect();
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), json!({ "stops": many })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["stops must hold 1 to 250 items"]));
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), json!({ "stops": "here" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["stops must be an array"]));
    let odd = json!({ "start": [52, 4], "stops": [7, { "lat": 1, "lng": 2, "stop_id": 5 }] });
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), odd).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["start must be a JSON object", "stops[0] must be a JSON object", "stops[1].stop_id must be a string"]));
    // Another tenant's persona is no persona of this tenant.
    let foreign = json!({ "persona_id": t.b["persona_id"], "stops": [east(1)] });
    let body = assert_error(app.post("/api/dispatch/routes/optimize", Some(a), foreign).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["persona_id names no persona of this tenant"]));
    // 250 stops are accepted.
    let most: Vec<Value> = (0..250).map(|i| json!({ "lat": 52.0 + f64::from(i % 17) * 0.01, "lng": 4.0 + f64::from(i) * 0.001 })).collect();
    let (s, body) = app.post("/api/dispatch/routes/optimize", Some(a), json!({ "stops": most })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(body["data"]["stops"].as_array().unwrap().len(), 250);
    assert!(body["data"]["total_km"].as_f64().unwrap() <= body["data"]["given_order_km"].as_f64().unwrap());
    assert!(app.events_of(&t.a["tenant_id"]).await.iter().filter(|e| *e == "dispatch.route.optimized.v1").count() == 1, "refusals record nothing");

    let id = body["data"]["route_id"].as_str().unwrap();
    let routes = [
        (Method::POST, "/api/dispatch/routes/optimize".to_string(), "dispatch.route.write"),
        (Method::GET, format!("/api/dispatch/routes/{id}"), "dispatch.route.read"),
    ];
    assert_scoped(&app, a, json!(["geo.address.read"]), &routes).await;
}
db_test!(bad_routes_are_refused_with_every_problem);

async fn drive_times_follow_the_speed_setting(app: TestApp) {
    let fast = app.variant(|c| c.dispatch_avg_speed_kmh = 60.0).await;
    let owner = fast.signup("speed@dispatch.example.com", "dispatch-speed").await;
    let token = owner["token"].as_str().unwrap();
    // One degree of a meridian (about 111.195 km) at 60 km/h is about 111.2 minutes.
    let (s, body) = fast.post("/api/dispatch/routes/optimize", Some(token), json!({ "stops": [{ "lat": 0, "lng": 0 }, { "lat": 1, "lng": 0 }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["avg_speed_kmh"], 60.0);
    assert!(close(&body["data"]["total_km"], 111.195, 0.01), "{body}");
    assert!(close(&body["data"]["drive_minutes"], 111.195, 0.02), "{body}");
    assert!(close(&body["data"]["stops"][1]["arrival_minutes"], 111.195, 0.02), "{body}");
}
db_test!(drive_times_follow_the_speed_setting);

async fn routes_are_listed_by_persona_and_time(app: TestApp) {
    let t = app.two_tenants("dispatch-list").await;
    let a = t.a_token.as_str();
    let (s, p) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let driver = p["data"]["persona_id"].as_str().unwrap().to_string();
    let (_, first) = app.post("/api/dispatch/routes/optimize", Some(a), json!({ "stops": [east(1), east(2)] })).await;
    let (s, second) = app.post("/api/dispatch/routes/optimize", Some(a), json!({ "persona_id": driver, "stops": [east(3)] })).await;
    assert_eq!(s, StatusCode::CREATED, "{second}");
    let (first, second) = (&first["data"], &second["data"]);
    app.post("/api/dispatch/routes/optimize", Some(&t.b_token), json!({ "stops": [east(1)] })).await;
    let listed = async |q: String| {
        let (s, b) = app.get(&format!("/api/dispatch/routes{q}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let ids: Vec<Value> = b["data"].as_array().unwrap().iter().map(|r| r["route_id"].clone()).collect();
        (b["total"].as_i64().unwrap(), ids)
    };
    let (_, all) = app.get("/api/dispatch/routes", Some(a)).await;
    assert_eq!((all["total"].as_i64(), &all["data"][0]), (Some(2), second), "latest first, as stored");
    assert_eq!(listed(String::new()).await, (2, vec![second["route_id"].clone(), first["route_id"].clone()]));
    assert_eq!(listed(format!("?persona_id={driver}")).await, (1, vec![second["route_id"].clone()]));
    assert_eq!(listed(format!("?persona_id={}", t.a["persona_id"].as_str().unwrap())).await, (1, vec![first["route_id"].clone()]));
    let at = second["optimized_at"].as_str().unwrap();
    assert_eq!(listed(format!("?from={at}")).await, (1, vec![second["route_id"].clone()]));
    assert_eq!(listed(format!("?to={at}")).await, (1, vec![first["route_id"].clone()]), "to is exclusive");
    assert_eq!(listed("?from=2099-01-01T00:00:00Z".into()).await, (0, vec![]));
    assert_eq!(listed("?limit=1&offset=1".into()).await, (2, vec![first["route_id"].clone()]));
    let (_, theirs) = app.get("/api/dispatch/routes", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 1);
    assert_error(app.get("/api/dispatch/routes?persona_id=driver-1", Some(a)).await, 400, "ValidationError");
    assert_error(app.get("/api/dispatch/routes?to=soon", Some(a)).await, 400, "ValidationError");
}
db_test!(routes_are_listed_by_persona_and_time);
