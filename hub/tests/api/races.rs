//! Races, generated from the catalogue: every operation that changes state
//! or consumes capacity declares `x-concurrency` where its route is
//! declared (the outcome of identical requests at once, and the requests
//! that bring a resource to the state it acts on). This test reads them
//! from `/openapi.json`, so a marked route is covered the moment it exists:
//! on PostgreSQL with two hub replicas on one database (where read
//! committed lets two transactions read the same state) and on SQLite, it
//! fires eight identical requests at once and checks the documented
//! outcome and the number of audit events the eight left behind.
//!
//! A marker:
//! `{ "outcome": O, "given": [[METHOD, path, body|null], ...], "params": {...}, "body": {...}, "events": N, "wins": N }`
//! - `given` runs in order as tenant A's owner; after each, the string
//!   fields of the answer's `data` become variables by name. `{tenant_id}`,
//!   `{persona_id}`, `{person_id}`, `{membership_id}`, `{app_identity_id}` (the owner's, also
//!   as `{owner_persona_id}` and so on, which no answer overrides) and
//!   `{unique}` (a fresh UUID) are set from the start; `{a.0.b}` is a path
//!   into the last answer's `data`. Variables fill path segments and JSON
//!   strings (a string that is one variable takes the variable's value);
//!   `params` sets path parameters from them (`{ "step_id": "{steps.0.step_id}" }`),
//!   `query` is the query string (`tenant_id={tenant_id}`).
//! - `one-wins`: one 2xx, seven 409 `Conflict` (or `losers`: 404 for a
//!   delete; `loser_error`: another error name of a 409); `events` (1).
//! - `capacity`: `wins` 2xx, the rest 409 (or `losers`); `events` (`wins`).
//! - `first-creates`: one 201, seven 200; `events` (8) entries.
//! - `same-answer`: eight equal 2xx answers (status and `data`); `events` (1).
//! - `independent`: eight 2xx, each its own; `events` (8). An operation
//!   that changes nothing (an evaluation, a search) is one with `events`
//!   as it records (often 0).
//! - `exempt` with a `reason`: an operation this harness cannot send (a
//!   signed or raw body, another protocol); every other operation that is
//!   not a `GET` declares an outcome, or this test fails naming it.
//!
//! `/admin` operations run with the operator's token; the audit entries
//! counted are the whole database's (the platform chain included).

use std::collections::HashMap;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const RACERS: usize = 8;
const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// The variables of one scenario and the last `given` answer's data.
struct Scope {
    vars: HashMap<String, Value>,
    last: Value,
}

impl Scope {
    fn lookup(&self, name: &str) -> Option<Value> {
        if let Some(v) = self.vars.get(name) {
            return Some(v.clone());
        }
        if !name.contains('.') {
            return None;
        }
        let mut at = &self.last;
        for part in name.split('.') {
            at = match part.parse::<usize>() {
                Ok(i) => at.get(i)?,
                Err(_) => at.get(part)?,
            };
        }
        Some(at.clone())
    }

    fn text(v: &Value) -> String {
        v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
    }

    /// `value` with every `{name}` filled in.
    fn fill(&self, value: &Value, what: &str) -> Value {
        match value {
            Value::String(s) => {
                if let Some(name) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}'))
                    && !name.contains(['{', '}'])
                {
                    return self.lookup(name).unwrap_or_else(|| panic!("{what}: no variable {name}"));
                }
                Value::String(self.fill_text(s, what))
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| self.fill(i, what)).collect()),
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), self.fill(v, what))).collect()),
            other => other.clone(),
        }
    }

    fn fill_text(&self, s: &str, what: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}').map(|c| open + c).unwrap_or_else(|| panic!("{what}: unclosed {{ in {s}"));
            let name = &rest[open + 1..close];
            out.push_str(&Self::text(&self.lookup(name).unwrap_or_else(|| panic!("{what}: no variable {name}"))));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    }

    fn learn(&mut self, data: &Value) {
        if let Some(map) = data.as_object() {
            for (k, v) in map {
                if v.is_string() {
                    self.vars.insert(k.clone(), v.clone());
                }
            }
        }
        self.last = data.clone();
    }
}

/// Every audit entry of the database: the tenant's chain and, for the
/// operator's routes, the platform's.
async fn audit_entries(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM audit_entry").fetch_one(&app.state().db.read).await.unwrap()
}

/// A request as tenant A's owner, or as the operator on `/admin`.
fn request(client: &reqwest::Client, base: &str, method: Method, path: &str, token: &str, body: Option<&Value>) -> reqwest::RequestBuilder {
    let req = client.request(method, format!("{base}{path}"));
    let req = if path.starts_with("/admin") { req.header("x-admin-ops-token", crate::operator::BREAK_GLASS) } else { req.bearer_auth(token) };
    match body {
        Some(b) => req.json(b),
        None => req,
    }
}

async fn send(req: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let res = req.send().await.expect("request");
    let status = res.status();
    let text = res.text().await.expect("body");
    (status, serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)))
}

/// Every operation marked `x-concurrency`, eight identical requests at
/// once, split between two replicas on PostgreSQL.
async fn every_marked_operation_keeps_its_outcome_under_eight_identical_requests(app: TestApp) {
    let replica = if app.backend == Backend::Postgres { Some(app.replica().await) } else { None };
    let hubs: Vec<&TestApp> = match &replica {
        Some(r) => vec![&app, r],
        None => vec![&app],
    };
    let (_, doc) = app.get("/openapi.json", None).await;
    let owner = app.signup("racer@races.example.com", "races").await;
    let token = owner["token"].as_str().unwrap().to_string();
    let mut covered = Vec::new();
    let mut unmarked = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let what = format!("{} {path}", method.to_uppercase());
            let Some(marker) = op.get("x-concurrency") else {
                if method != "get" {
                    unmarked.push(what);
                }
                continue;
            };
            if marker["outcome"] == "exempt" {
                assert!(marker["reason"].as_str().is_some_and(|r| !r.is_empty()), "{what}: an exempt operation says why");
                continue;
            }
            // `RACES_ONLY=/api/tickets` runs the operations whose path holds it.
            if std::env::var("RACES_ONLY").is_ok_and(|only| !path.contains(&only)) {
                continue;
            }
            let mut scope = Scope { vars: HashMap::new(), last: Value::Null };
            for f in ["tenant_id", "persona_id", "person_id", "membership_id", "app_identity_id"] {
                scope.vars.insert(f.to_string(), owner[f].clone());
                scope.vars.insert(format!("owner_{f}"), owner[f].clone());
            }
            scope.vars.insert("unique".to_string(), json!(uuid::Uuid::now_v7().to_string()));
            for step in marker["given"].as_array().into_iter().flatten() {
                let m = Method::from_bytes(step[0].as_str().unwrap().as_bytes()).unwrap();
                let p = scope.fill_text(step[1].as_str().unwrap(), &what);
                let body = (!step[2].is_null()).then(|| scope.fill(&step[2], &what));
                let (s, answer) = send(request(&app.client, &app.base, m.clone(), &p, &token, body.as_ref())).await;
                assert!(s.is_success(), "{what}: given {m} {p} answered {s}: {answer}");
                scope.learn(&answer["data"]);
            }
            // `params` names path parameters no answer names flatly.
            for (k, v) in marker["params"].as_object().into_iter().flatten() {
                let v = scope.fill(v, &what);
                scope.vars.insert(k.clone(), v);
            }
            let mut url = scope.fill_text(path, &what);
            if let Some(query) = marker["query"].as_str() {
                url = format!("{url}?{}", scope.fill_text(query, &what));
            }
            let body = marker.get("body").map(|b| scope.fill(b, &what));
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let before = audit_entries(&app).await;
            // All eight wait at one barrier, then send: they reach the
            // hubs within a millisecond of one another.
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(RACERS));
            let mut racers = Vec::new();
            for i in 0..RACERS {
                let hub = hubs[i % hubs.len()];
                let req = request(&hub.client, &hub.base, m.clone(), &url, &token, body.as_ref());
                let barrier = barrier.clone();
                racers.push(tokio::spawn(async move {
                    barrier.wait().await;
                    send(req).await
                }));
            }
            let mut answers = Vec::new();
            for r in racers {
                answers.push(r.await.unwrap());
            }
            let added = audit_entries(&app).await - before;
            check(&what, marker, &answers, added);
            covered.push(what);
        }
    }
    eprintln!("races: {} operations: {covered:?}", covered.len());
    if std::env::var_os("RACES_ONLY").is_none() {
        assert!(unmarked.is_empty(), "{} operations that write declare no x-concurrency: {unmarked:#?}", unmarked.len());
    }
    if std::env::var_os("RACES_ONLY").is_none() {
        assert!(covered.len() >= 10, "the race test ran over {} operations", covered.len());
    }
}
db_test!(every_marked_operation_keeps_its_outcome_under_eight_identical_requests);

/// Asserts the outcome `marker` declares over the eight `answers`, and the
/// audit entries they `added`.
fn check(what: &str, marker: &Value, answers: &[(StatusCode, Value)], added: i64) {
    let statuses: Vec<u16> = answers.iter().map(|(s, _)| s.as_u16()).collect();
    let shown = format!("{what}: statuses {statuses:?}, answers {:?}", answers.iter().map(|(_, b)| b.to_string()).collect::<Vec<_>>());
    assert!(statuses.iter().all(|s| *s < 500), "{shown}");
    let count = |f: &dyn Fn(u16) -> bool| statuses.iter().filter(|s| f(**s)).count();
    let ok = count(&|s| (200..300).contains(&s));
    // The losers' status: 409 unless the marker names another (a delete's
    // losers find nothing: 404).
    let loser = marker["losers"].as_u64().unwrap_or(409) as u16;
    let conflicts = count(&|s| s == loser);
    let outcome = marker["outcome"].as_str().unwrap_or_else(|| panic!("{what}: x-concurrency without an outcome"));
    let events = marker["events"].as_i64();
    let expected_events = match outcome {
        "one-wins" => {
            assert_eq!((ok, conflicts), (1, RACERS - 1), "one success, the rest {loser}: {shown}");
            let error = marker["loser_error"].as_str().unwrap_or("Conflict");
            for (s, b) in answers.iter().filter(|(s, _)| *s == StatusCode::CONFLICT) {
                assert_eq!(b["error"], error, "{what}: {s} {b}");
            }
            events.unwrap_or(1)
        }
        "capacity" => {
            let wins = marker["wins"].as_u64().unwrap_or_else(|| panic!("{what}: capacity without wins")) as usize;
            assert_eq!((ok, conflicts), (wins, RACERS - wins), "{wins} successes, the rest {loser}: {shown}");
            events.unwrap_or(wins as i64)
        }
        "first-creates" => {
            assert_eq!((count(&|s| s == 201), count(&|s| s == 200)), (1, RACERS - 1), "one 201, the rest 200: {shown}");
            events.unwrap_or(RACERS as i64)
        }
        "same-answer" => {
            assert_eq!(ok, RACERS, "{shown}");
            let first = &answers[0];
            for a in answers {
                assert_eq!((a.0, &a.1["data"]), (first.0, &first.1["data"]), "every answer is the first's: {shown}");
            }
            events.unwrap_or(1)
        }
        "independent" => {
            assert_eq!(ok, RACERS, "{shown}");
            events.unwrap_or(RACERS as i64)
        }
        other => panic!("{what}: unknown outcome {other}"),
    };
    assert_eq!(added, expected_events, "audit entries added by the eight: {shown}");
}

/// One SQL text, one set of bound types: a statement whose nullable
/// double is sometimes null and sometimes a number binds the same
/// parameter types either way. PostgreSQL prepares a statement once per
/// connection; a number bound to a statement prepared for a null of
/// another type was refused (500, "incorrect binary data format").
async fn statements_bind_the_same_types_whether_a_double_is_null_or_not(app: TestApp) {
    let owner = app.signup("binds@races.example.com", "binds").await;
    let token = owner["token"].as_str().unwrap();
    let persona = owner["persona_id"].as_str().unwrap();
    for i in 0..12 {
        // Null first, then a number, alternating, one request at a time:
        // the pool hands the same idle connection back.
        let body = if i % 2 == 0 { json!({ "skills": ["a"] }) } else { json!({ "skills": ["a"], "location": { "lat": 52.37, "lng": 4.89 } }) };
        let (s, w) = app.call(Method::PUT, &format!("/api/assignment/workload/{persona}"), Some(token), Some(body)).await;
        assert_eq!(s, if i == 0 { StatusCode::CREATED } else { StatusCode::OK }, "round {i}: {w}");
        let expected = if i % 2 == 0 { Value::Null } else { json!(52.37) };
        assert_eq!(w["data"]["lat"].clone(), expected, "round {i}: {w}");
    }
    for i in 0..12 {
        let (s, reg) = app
            .post("/api/auth/register", None, json!({ "email": format!("twin{i}@binds.example.com"), "password": "twin password", "display_name": "T" }))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{reg}");
        let (s, m) = app.post("/api/memberships", Some(token), json!({ "person_id": reg["data"]["person_id"] })).await;
        assert_eq!(s, StatusCode::CREATED, "{m}");
        let mut body = json!({ "person_id_a": owner["person_id"], "person_id_b": reg["data"]["person_id"] });
        if i % 2 == 1 {
            body["confidence"] = json!(0.75);
        }
        let (s, l) = app.post("/api/identity-resolver/links", Some(token), body).await;
        assert_eq!(s, StatusCode::CREATED, "round {i}: {l}");
        assert_eq!(l["data"]["confidence"], if i % 2 == 1 { json!(0.75) } else { Value::Null }, "round {i}: {l}");
    }
}
db_test!(statements_bind_the_same_types_whether_a_double_is_null_or_not);
