//! sdk-scheduling: connections (credentials sealed), appointments, and push
//! to a CalDAV calendar, tested against a small CalDAV server started here
//! that stores what is PUT and checks it as a calendar server would.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode as Http, header},
    response::{IntoResponse, Response},
    routing::put,
};
use base64::Engine;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// The objects of one calendar collection, by name; ETags count writes.
#[derive(Clone, Default)]
struct Calendar {
    objects: Arc<Mutex<HashMap<String, String>>>,
    writes: Arc<Mutex<u64>>,
}

const USER: &str = "cal-user";
const PASSWORD: &str = "s3cret-cal";

fn authorised(headers: &HeaderMap) -> bool {
    let expected = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}")));
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) == Some(expected.as_str())
}

/// What a calendar server checks of an iCalendar object: CRLF lines of at
/// most 75 octets, one VEVENT in a VCALENDAR, a UID.
fn well_formed(text: &str) -> bool {
    text.ends_with("\r\n")
        && text.trim_end_matches("\r\n").split("\r\n").all(|l| l.len() <= 75 && !l.contains('\n'))
        && text.starts_with("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n")
        && text.ends_with("END:VEVENT\r\nEND:VCALENDAR\r\n")
        && text.contains("\r\nUID:")
}

async fn put_object(State(cal): State<Calendar>, Path(name): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorised(&headers) {
        return Http::UNAUTHORIZED.into_response();
    }
    if !headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/calendar")) {
        return Http::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    let Ok(text) = String::from_utf8(body.to_vec()) else { return Http::BAD_REQUEST.into_response() };
    if !well_formed(&text) {
        return Http::BAD_REQUEST.into_response();
    }
    let mut objects = cal.objects.lock().unwrap();
    let exists = objects.contains_key(&name);
    if exists && headers.get(header::IF_NONE_MATCH).is_some_and(|v| v == "*") {
        return Http::PRECONDITION_FAILED.into_response();
    }
    objects.insert(name, text);
    let mut writes = cal.writes.lock().unwrap();
    *writes += 1;
    let status = if exists { Http::NO_CONTENT } else { Http::CREATED };
    (status, [(header::ETAG, format!("\"{writes}\""))]).into_response()
}

async fn delete_object(State(cal): State<Calendar>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    if !authorised(&headers) {
        return Http::UNAUTHORIZED.into_response();
    }
    match cal.objects.lock().unwrap().remove(&name) {
        Some(_) => Http::NO_CONTENT.into_response(),
        None => Http::NOT_FOUND.into_response(),
    }
}

/// Starts the calendar server; its collection URL (no trailing slash).
async fn calendar_server() -> (String, Calendar) {
    let cal = Calendar::default();
    let router = axum::Router::new().route("/dav/cal/{name}", put(put_object).delete(delete_object)).with_state(cal.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}/dav/cal"), cal)
}

/// The object's content lines, unfolded.
fn unfolded(text: &str) -> Vec<String> {
    text.replace("\r\n ", "").trim_end_matches("\r\n").split("\r\n").map(str::to_string).collect()
}

async fn appointments_push_to_a_caldav_calendar(app: TestApp) {
    let t = app.two_tenants("scheduling").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (collection, cal) = calendar_server().await;

    let (s, c) = app
        .post("/api/scheduling/connections", Some(a), json!({ "name": "Front desk", "collection_url": collection, "username": USER, "password": PASSWORD }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let connection = c["data"]["connection_id"].as_str().unwrap().to_string();
    assert_eq!(
        (c["data"]["provider"].as_str(), c["data"]["auth_scheme"].as_str(), c["data"]["collection_url"].as_str()),
        (Some("caldav"), Some("basic"), Some(format!("{collection}/").as_str()))
    );
    assert!(!c.to_string().contains(PASSWORD));
    let sealed: Vec<u8> = sqlx::query_scalar("SELECT credential_sealed FROM scheduling_connection WHERE connection_id = $1")
        .bind(&connection)
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert!(!sealed.windows(PASSWORD.len()).any(|w| w == PASSWORD.as_bytes()), "the credential is sealed at rest");
    let (s, wrong) =
        app.post("/api/scheduling/connections", Some(a), json!({ "name": "Wrong", "collection_url": collection, "username": USER, "password": "nope" })).await;
    assert_eq!(s, StatusCode::CREATED, "{wrong}");
    let b = assert_error(
        app.post("/api/scheduling/connections", Some(a), json!({ "collection_url": "ftp://cal.example.com/", "username": USER, "provider": "exchange" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name is required", "provider must be one of: caldav"]));
    // Matching its schema, the body still names an http(s) URL and a whole credential.
    let b = assert_error(
        app.post("/api/scheduling/connections", Some(a), json!({ "name": "Bad", "collection_url": "ftp://cal.example.com/", "username": USER })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["collection_url must be an http or https URL of at most 2000 characters", "give username with password, or token, or neither"])
    );
    let b = assert_error(
        app.post("/api/scheduling/connections", Some(a), json!({ "name": "Bad", "collection_url": collection, "token": "t".repeat(4097) })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["token must be at most 4096 characters"]));
    let (_, l) = app.get("/api/scheduling/connections", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][1]["connection_id"].as_str()), (Some(2), Some(connection.as_str())));
    assert!(!l.to_string().contains(PASSWORD));

    let description = format!("Bring notes, results; and the card.\nSecond line: {}", "long text ".repeat(20));
    let (s, ap) = app
        .post(
            "/api/scheduling/appointments",
            Some(a),
            json!({
                "title": "Check-up, room 4; bring notes", "starts_at": "2027-05-03T09:00:00+02:00", "ends_at": "2027-05-03T09:30:00+02:00",
                "description": description, "location": "Clinic\\Main",
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{ap}");
    let id = ap["data"]["appointment_id"].as_str().unwrap().to_string();
    assert_eq!((ap["data"]["status"].as_str(), ap["data"]["revision"].as_i64()), (Some("booked"), Some(0)));
    let b = assert_error(
        app.post("/api/scheduling/appointments", Some(a), json!({ "starts_at": "2027-05-03T10:00:00Z", "ends_at": "tomorrow" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["title is required", "ends_at must be an RFC 3339 timestamp"]));
    // Matching its schema, the body still ends after it starts.
    let b = assert_error(
        app.post("/api/scheduling/appointments", Some(a), json!({ "title": "t", "starts_at": "2027-05-03T10:00:00Z", "ends_at": "2027-05-03T09:00:00Z" }))
            .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["ends_at must be after starts_at"]));

    // Push: created, with the text escaped and long lines folded.
    let push = |conn: &str| json!({ "tenant_id": tenant, "connection_id": conn });
    let b = assert_error(app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["tenant_id is required", "connection_id is required"]));
    // Another tenant's credential with this tenant's id in the body: refused first.
    assert_error(app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(&t.b_token), push(&connection)).await, 403, "TenantMismatch");
    let (s, p) = app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push(&connection)).await;
    assert_eq!(s, StatusCode::OK, "{p}");
    let href = format!("{collection}/{id}.ics");
    assert_eq!(
        (p["data"]["action"].as_str(), p["data"]["href"].as_str(), p["data"]["etag"].as_str(), p["data"]["sequence"].as_i64()),
        (Some("created"), Some(href.as_str()), Some("\"1\""), Some(0))
    );
    let stored = cal.objects.lock().unwrap().get(&format!("{id}.ics")).cloned().expect("the event is on the calendar");
    assert!(stored.split("\r\n").any(|l| l.starts_with(' ')), "the description's line is folded: {stored}");
    let lines = unfolded(&stored);
    for expected in [
        format!("UID:{id}@hub"),
        "DTSTART:20270503T070000Z".to_string(),
        "DTEND:20270503T073000Z".to_string(),
        "SEQUENCE:0".to_string(),
        "SUMMARY:Check-up\\, room 4\\; bring notes".to_string(),
        // Trimmed, as every text field is.
        format!("DESCRIPTION:Bring notes\\, results\\; and the card.\\nSecond line: {}", "long text ".repeat(20).trim_end()),
        "LOCATION:Clinic\\\\Main".to_string(),
    ] {
        assert!(lines.contains(&expected), "{expected} in {lines:?}");
    }

    // Rescheduled and pushed again: the same object, updated, SEQUENCE 1.
    let (s, r) = app
        .post(
            &format!("/api/scheduling/appointments/{id}/reschedule"),
            Some(a),
            json!({ "starts_at": "2027-05-04T09:00:00Z", "ends_at": "2027-05-04T10:00:00Z" }),
        )
        .await;
    assert_eq!((s, r["data"]["revision"].as_i64()), (StatusCode::OK, Some(1)), "{r}");
    let (s, p) = app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push(&connection)).await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!((p["data"]["action"].as_str(), p["data"]["etag"].as_str(), p["data"]["sequence"].as_i64()), (Some("updated"), Some("\"2\""), Some(1)));
    let lines = unfolded(&cal.objects.lock().unwrap()[&format!("{id}.ics")]);
    assert!(lines.contains(&"SEQUENCE:1".to_string()) && lines.contains(&"DTSTART:20270504T090000Z".to_string()), "{lines:?}");
    assert_eq!(cal.objects.lock().unwrap().len(), 1);

    // The calendar refusing (a wrong password) is 503, and nothing is mapped.
    let b = assert_error(
        app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push(wrong["data"]["connection_id"].as_str().unwrap())).await,
        503,
        "ServiceUnavailable",
    );
    assert_eq!(b["details"], json!(["the calendar server did not accept the change; retry the push later"]));
    let mapped: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM scheduling_push WHERE appointment_id = $1").bind(&id).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(mapped, 1);
    let b = assert_error(
        app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(&t.b_token), json!({ "tenant_id": t.b["tenant_id"], "connection_id": connection }))
            .await,
        404,
        "NotFound",
    );
    assert_eq!(b["error"], "NotFound");

    // Cancelled: the push removes the event; once more changes nothing.
    let (s, c) = app.post(&format!("/api/scheduling/appointments/{id}/cancel"), Some(a), json!({})).await;
    assert_eq!((s, c["data"]["status"].as_str()), (StatusCode::OK, Some("cancelled")));
    assert_error(app.post(&format!("/api/scheduling/appointments/{id}/cancel"), Some(a), json!({})).await, 409, "Conflict");
    assert_error(
        app.post(
            &format!("/api/scheduling/appointments/{id}/reschedule"),
            Some(a),
            json!({ "starts_at": "2027-05-04T09:00:00Z", "ends_at": "2027-05-04T10:00:00Z" }),
        )
        .await,
        409,
        "Conflict",
    );
    let (s, p) = app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push(&connection)).await;
    assert_eq!((s, p["data"]["action"].as_str()), (StatusCode::OK, Some("cancelled")), "{p}");
    assert!(cal.objects.lock().unwrap().is_empty(), "the event is removed from the calendar");
    let (_, p) = app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push(&connection)).await;
    assert_eq!((p["data"]["action"].as_str(), p["data"]["etag"].clone()), (Some("unchanged"), Value::Null));

    let (s, g) = app.get(&format!("/api/scheduling/appointments/{id}"), Some(a)).await;
    assert_eq!((s, g["data"]["status"].as_str(), g["data"]["revision"].as_i64()), (StatusCode::OK, Some("cancelled"), Some(2)));
    assert_error(app.get(&format!("/api/scheduling/appointments/{id}"), Some(&t.b_token)).await, 404, "NotFound");
    let b = assert_error(
        app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push(&uuid::Uuid::now_v7().to_string())).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["connection_id is not a connection of this tenant"]));

    let events = app.events_of(&tenant).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (
            count("scheduling.connection.created.v1"),
            count("scheduling.appointment.booked.v1"),
            count("scheduling.appointment.rescheduled.v1"),
            count("scheduling.appointment.cancelled.v1"),
            count("scheduling.calendar.pushed.v1")
        ),
        (2, 1, 1, 1, 4)
    );
}
db_test!(appointments_push_to_a_caldav_calendar);

async fn connections_are_read_renamed_given_a_new_credential_and_deleted(app: TestApp) {
    let t = app.two_tenants("scheduling-conn").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].clone());
    let (collection, cal) = calendar_server().await;
    let (s, c) = app
        .post("/api/scheduling/connections", Some(a), json!({ "name": "Desk", "collection_url": collection, "username": USER, "password": "old one" }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let connection = c["data"]["connection_id"].as_str().unwrap().to_string();
    let url = format!("/api/scheduling/connections/{connection}");
    let (s, g) = app.get(&url, Some(a)).await;
    assert_eq!((s, &g["data"]), (StatusCode::OK, &c["data"]), "{g}");
    assert_error(app.get(&url, Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get("/api/scheduling/connections/nope", Some(a)).await, 404, "NotFound");

    let (_, ap) = app
        .post("/api/scheduling/appointments", Some(a), json!({ "title": "Visit", "starts_at": "2027-06-01T09:00:00Z", "ends_at": "2027-06-01T10:00:00Z" }))
        .await;
    let id = ap["data"]["appointment_id"].as_str().unwrap().to_string();
    let push = json!({ "tenant_id": tenant, "connection_id": connection });
    assert_error(app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push.clone()).await, 503, "ServiceUnavailable");

    // The changed password, sealed as on create; the name as it was.
    let patch = |body: Value| app.call(reqwest::Method::PATCH, &url, Some(a), Some(body));
    let (s, u) = patch(json!({ "username": USER, "password": PASSWORD })).await;
    assert_eq!(s, StatusCode::OK, "{u}");
    assert_eq!((u["data"]["name"].as_str(), u["data"]["auth_scheme"].as_str()), (Some("Desk"), Some("basic")));
    assert!(!u.to_string().contains(PASSWORD));
    let sealed: Vec<u8> = sqlx::query_scalar("SELECT credential_sealed FROM scheduling_connection WHERE connection_id = $1")
        .bind(&connection)
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert!(!sealed.windows(PASSWORD.len()).any(|w| w == PASSWORD.as_bytes()), "the credential is sealed at rest");
    let (s, p) = app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push.clone()).await;
    assert_eq!((s, p["data"]["action"].as_str()), (StatusCode::OK, Some("created")), "{p}");
    let (s, u) = patch(json!({ "name": "Front desk" })).await;
    assert_eq!((s, u["data"]["name"].as_str(), u["data"]["auth_scheme"].as_str()), (StatusCode::OK, Some("Front desk"), Some("basic")));
    let b = assert_error(patch(json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, username with password, token"]));
    let b = assert_error(patch(json!({ "name": "x", "password": "only" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give username with password, or token"]));
    let b = assert_error(patch(json!({ "name": "x".repeat(201), "token": 7 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name must be at most 200 characters", "token must be a string"]));
    assert_error(app.call(reqwest::Method::PATCH, &url, Some(&t.b_token), Some(json!({ "name": "mine" }))).await, 404, "NotFound");
    let (s, u) = patch(json!({ "token": "bearer-token" })).await;
    assert_eq!((s, u["data"]["auth_scheme"].as_str()), (StatusCode::OK, Some("bearer")));
    let (_, u) = patch(json!({ "username": USER, "password": PASSWORD })).await;
    assert_eq!(u["data"]["auth_scheme"].as_str(), Some("basic"));

    // Deleted with its credential and its push records; the event stays on the calendar.
    assert_error(app.call(reqwest::Method::DELETE, &url, Some(&t.b_token), None).await, 404, "NotFound");
    let (s, d) = app.call(reqwest::Method::DELETE, &url, Some(a), None).await;
    assert_eq!((s, &d["data"]), (StatusCode::OK, &json!({ "connection_id": connection, "deleted": true })), "{d}");
    assert_error(app.call(reqwest::Method::DELETE, &url, Some(a), None).await, 404, "NotFound");
    assert_error(app.get(&url, Some(a)).await, 404, "NotFound");
    let (_, l) = app.get("/api/scheduling/connections", Some(a)).await;
    assert_eq!(l["total"], 0);
    let left: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM scheduling_push WHERE connection_id = $1").bind(&connection).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(left, 0);
    assert_eq!(cal.objects.lock().unwrap().len(), 1);
    let b = assert_error(app.post(&format!("/api/scheduling/appointments/{id}/push"), Some(a), push).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["connection_id is not a connection of this tenant"]));

    let events = app.events_of(&tenant).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!((count("scheduling.connection.updated.v1"), count("scheduling.connection.deleted.v1")), (4, 1));
}
db_test!(connections_are_read_renamed_given_a_new_credential_and_deleted);

async fn appointments_are_listed_as_a_calendar_and_changed(app: TestApp) {
    let t = app.two_tenants("scheduling-list").await;
    let a = t.a_token.as_str();
    let (s, c) = app.post("/api/crm/contacts", Some(a), json!({ "name": "Dee" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let contact = c["data"]["contact_id"].as_str().unwrap().to_string();
    let book = |title: &str, starts: &str, ends: &str, contact: Option<&str>| {
        let mut body = json!({ "title": title, "starts_at": starts, "ends_at": ends });
        if let Some(c) = contact {
            body["contact_id"] = json!(c);
        }
        body
    };
    let mut ids = Vec::new();
    // Booked out of order: the list is in calendar order.
    for body in [
        book("Wed", "2027-03-03T09:00:00Z", "2027-03-03T10:00:00Z", Some(&contact)),
        book("Mon", "2027-03-01T09:00:00Z", "2027-03-01T10:00:00Z", None),
        book("Tue", "2027-03-02T23:00:00Z", "2027-03-03T01:00:00Z", Some(&contact)),
    ] {
        let (s, r) = app.post("/api/scheduling/appointments", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        ids.push(r["data"]["appointment_id"].as_str().unwrap().to_string());
    }
    let (wed, mon, tue) = (ids[0].clone(), ids[1].clone(), ids[2].clone());
    let list = |l: &Value| l["data"].as_array().unwrap().iter().map(|r| r["appointment_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, l) = app.get("/api/scheduling/appointments", Some(a)).await;
    assert_eq!((s, list(&l), l["total"].as_i64()), (StatusCode::OK, vec![mon.clone(), tue.clone(), wed.clone()], Some(3)), "{l}");
    // A day's view: what overlaps it, the one across midnight too.
    let (_, l) = app.get("/api/scheduling/appointments?from=2027-03-03T00:00:00Z&to=2027-03-04T00:00:00Z", Some(a)).await;
    assert_eq!((list(&l), l["total"].as_i64()), (vec![tue.clone(), wed.clone()], Some(2)));
    let (_, l) = app.get("/api/scheduling/appointments?to=2027-03-01T09:00:00Z", Some(a)).await;
    assert_eq!(l["total"], 0, "an appointment starting at `to` is not before it");
    let (_, l) = app.get("/api/scheduling/appointments?from=2027-03-03T03:00:00%2B02:00", Some(a)).await;
    assert_eq!(list(&l), vec![wed.clone()], "times in any offset; one ending at `from` is not after it");
    let (_, l) = app.get(&format!("/api/scheduling/appointments?contact_id={contact}&limit=1&offset=1"), Some(a)).await;
    assert_eq!((list(&l), l["total"].as_i64()), (vec![wed.clone()], Some(2)));
    let b = assert_error(app.get("/api/scheduling/appointments?from=monday&status=moved&contact_id=dee", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["from must be an RFC 3339 timestamp", "status must be one of: booked, cancelled", "contact_id must be a UUID"]));
    let b = assert_error(app.get("/api/scheduling/appointments?from=2027-03-02T00:00:00Z&to=2027-03-01T00:00:00Z", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["to must be after from"]));
    let (_, l) = app.get("/api/scheduling/appointments", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0, "B sees none of A's");

    // Changed: title, description, location; the time stays; the revision moves on.
    let url = format!("/api/scheduling/appointments/{mon}");
    let (s, r) = app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "location": "Room 2", "description": "bring the form" }))).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["title"].as_str(), r["data"]["location"].as_str(), r["data"]["description"].as_str(), r["data"]["revision"].as_i64()),
        (Some("Mon"), Some("Room 2"), Some("bring the form"), Some(1))
    );
    let (s, r) = app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "title": "Monday check" }))).await;
    assert_eq!(
        (s, r["data"]["title"].as_str(), r["data"]["location"].as_str(), r["data"]["revision"].as_i64()),
        (StatusCode::OK, Some("Monday check"), Some("Room 2"), Some(2))
    );
    let b = assert_error(app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "starts_at": "2027-03-01T11:00:00Z" }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of title, description, location"]));
    let b = assert_error(app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "title": "x".repeat(301) }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["title must be at most 300 characters"]));
    assert_error(app.call(reqwest::Method::PATCH, &url, Some(&t.b_token), Some(json!({ "title": "mine" }))).await, 404, "NotFound");
    let (s, _) = app.post(&format!("{url}/cancel"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let b = assert_error(app.call(reqwest::Method::PATCH, &url, Some(a), Some(json!({ "title": "late" }))).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the appointment is cancelled: only a booked appointment can be changed"]));
    let (_, l) = app.get("/api/scheduling/appointments?status=cancelled", Some(a)).await;
    assert_eq!((list(&l), l["data"][0]["title"].as_str()), (vec![mon.clone()], Some("Monday check")));
    let (_, l) = app.get("/api/scheduling/appointments?status=booked", Some(a)).await;
    assert_eq!(l["total"], 2);

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "scheduling.appointment.updated.v1").count(), 2);
}
db_test!(appointments_are_listed_as_a_calendar_and_changed);
