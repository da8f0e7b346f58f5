//! sdk-identity-resolver: two members of a tenant proposed as one human, a
//! steward review, the named steward's verdict, and a merge that is
//! recorded and reversed without moving anything of either person.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const LINKS: &str = "/api/identity-resolver/links";

/// A registered person admitted to the tenant of `token`; their person_id.
async fn member(app: &TestApp, token: &str, email: &str) -> Value {
    let (s, reg) = app.post("/api/auth/register", None, json!({ "email": email, "password": "member password", "display_name": "M" })).await;
    assert_eq!(s, StatusCode::CREATED, "{reg}");
    let (s, m) = app.post("/api/memberships", Some(token), json!({ "person_id": reg["data"]["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    reg["data"]["person_id"].clone()
}

async fn propose(app: &TestApp, token: &str, a: &Value, b: &Value) -> (StatusCode, Value) {
    app.post(LINKS, Some(token), json!({ "person_id_a": a, "person_id_b": b })).await
}

async fn review(app: &TestApp, token: &str, link: &Value, approver: &Value) -> (StatusCode, Value) {
    app.post(&format!("{LINKS}/{}/steward-review", link.as_str().unwrap()), Some(token), json!({ "approver_persona_id": approver })).await
}

async fn verdict(app: &TestApp, token: &str, link: &Value, body: Value) -> (StatusCode, Value) {
    app.post(&format!("{LINKS}/{}/verdict", link.as_str().unwrap()), Some(token), body).await
}

async fn unmerge(app: &TestApp, token: &str, link: &Value) -> (StatusCode, Value) {
    app.post(&format!("{LINKS}/{}/unmerge", link.as_str().unwrap()), Some(token), json!({})).await
}

async fn person_status(app: &TestApp, person: &Value) -> String {
    sqlx::query_scalar("SELECT status FROM identity_person WHERE person_id = $1").bind(person.as_str().unwrap()).fetch_one(&app.state().db.read).await.unwrap()
}

/// A link proposed and put in review of `approver`: (link_id, step_id).
async fn in_review(app: &TestApp, token: &str, a: &Value, b: &Value, approver: &Value) -> (Value, Value) {
    let (s, l) = propose(app, token, a, b).await;
    assert_eq!(s, StatusCode::CREATED, "{l}");
    let (s, step) = review(app, token, &l["data"]["link_id"], approver).await;
    assert_eq!(s, StatusCode::CREATED, "{step}");
    (l["data"]["link_id"].clone(), step["data"]["step_id"].clone())
}

async fn an_approved_link_merges_the_pair_until_it_is_unmerged(app: TestApp) {
    let t = app.two_tenants("res").await;
    let a = t.a_token.as_str();
    let (owner, steward) = (&t.a["person_id"], &t.a["persona_id"]);
    let twin = member(&app, a, "twin@res.example.com").await;

    let (s, l) = app.post(LINKS, Some(a), json!({ "person_id_a": owner, "person_id_b": twin, "evidence": { "same_phone": true }, "confidence": 0.92 })).await;
    assert_eq!(s, StatusCode::CREATED, "{l}");
    let d = &l["data"];
    assert_eq!((&d["person_id_a"], &d["person_id_b"], d["status"].as_str()), (owner, &twin, Some("proposed")));
    assert_eq!(
        (&d["evidence"], &d["confidence"], &d["survivor_person_id"], &d["steps"]),
        (&json!({ "same_phone": true }), &json!(0.92), &Value::Null, &json!([]))
    );
    let link = d["link_id"].clone();

    let (s, step) = review(&app, a, &link, steward).await;
    assert_eq!(s, StatusCode::CREATED, "{step}");
    assert_eq!((&step["data"]["link_id"], &step["data"]["approver_persona_id"], step["data"]["status"].as_str()), (&link, steward, Some("open")));
    let step_id = step["data"]["step_id"].clone();
    let (_, read) = app.get(&format!("{LINKS}/{}", link.as_str().unwrap()), Some(a)).await;
    assert_eq!((read["data"]["status"].as_str(), read["data"]["steps"][0]["step_id"].clone()), (Some("in_review"), step_id.clone()));

    let (s, m) = verdict(&app, a, &link, json!({ "step_id": step_id, "decision": "approve", "acting_persona_id": steward })).await;
    assert_eq!(s, StatusCode::OK, "{m}");
    let d = &m["data"];
    assert_eq!((d["status"].as_str(), &d["survivor_person_id"]), (Some("merged"), owner));
    assert!(d["decided_at"].is_string() && d["unmerged_at"].is_null(), "{d}");
    assert_eq!((d["steps"][0]["status"].as_str(), &d["steps"][0]["acting_persona_id"]), (Some("approved"), steward));
    assert_eq!((person_status(&app, &twin).await, person_status(&app, owner).await), ("merged".to_string(), "active".to_string()));
    // Nothing of the absorbed person moved: they still log in, as themselves, to their membership.
    let login = json!({ "email": "twin@res.example.com", "password": "member password", "tenant_id": t.a["tenant_id"] });
    let (s, tok) = app.post("/api/auth/login", None, login.clone()).await;
    assert_eq!(s, StatusCode::OK, "{tok}");
    assert_eq!(claims(tok["data"]["token"].as_str().unwrap())["sub"], twin);
    assert_error(verdict(&app, a, &link, json!({ "step_id": step_id, "decision": "reject" })).await, 409, "Conflict");

    let (s, u) = unmerge(&app, a, &link).await;
    assert_eq!(s, StatusCode::OK, "{u}");
    assert_eq!((u["data"]["status"].as_str(), &u["data"]["survivor_person_id"], &u["data"]["decided_at"]), (Some("unmerged"), &Value::Null, &d["decided_at"]));
    assert!(u["data"]["unmerged_at"].is_string());
    assert_eq!(person_status(&app, &twin).await, "active");
    let b = assert_error(unmerge(&app, a, &link).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the link is unmerged: only a merged link is unmerged"]));
    assert_eq!(app.post("/api/auth/login", None, login).await.0, StatusCode::OK);
    // The pair, no longer merged, may be proposed again.
    assert_eq!(propose(&app, a, &twin, owner).await.0, StatusCode::CREATED);

    let events: Vec<String> =
        app.events_of(&t.a["tenant_id"]).await.into_iter().filter(|e| e.starts_with("identity.link.") || e.starts_with("identity.merge.")).collect();
    assert_eq!(
        events,
        [
            "identity.link.proposed.v1",
            "identity.link.review_opened.v1",
            "identity.merge.approved.v1",
            "identity.merge.reverted.v1",
            "identity.link.proposed.v1"
        ]
    );
    let approved: String =
        sqlx::query_scalar("SELECT payload FROM audit_entry WHERE event_type = 'identity.merge.approved.v1'").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&approved).unwrap(),
        json!({ "link_id": link, "step_id": step_id, "acting_persona_id": steward, "survivor_person_id": owner, "absorbed_person_id": twin })
    );
}
db_test!(an_approved_link_merges_the_pair_until_it_is_unmerged);

async fn proposals_are_checked_before_anything_is_written(app: TestApp) {
    let t = app.two_tenants("resp").await;
    let a = t.a_token.as_str();
    let owner = &t.a["person_id"];
    let twin = member(&app, a, "twin@resp.example.com").await;
    let b = assert_error(app.post(LINKS, Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["person_id_a is required", "person_id_b is required"]));
    let b = assert_error(
        app.post(LINKS, Some(a), json!({ "person_id_a": "x", "person_id_b": owner, "evidence": [1], "confidence": 1.5 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["person_id_a must be a UUID", "evidence must be a JSON object", "confidence must be a number from 0 to 1"]));
    // The body's schema first; then what it cannot say.
    let b = assert_error(app.post(LINKS, Some(a), json!({ "person_id_a": owner, "person_id_b": owner, "confidence": "high" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["confidence must be a number from 0 to 1"]));
    let b = assert_error(app.post(LINKS, Some(a), json!({ "person_id_a": owner, "person_id_b": owner, "confidence": 0.5 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["person_id_a and person_id_b must be two persons"]));
    let b = assert_error(propose(&app, a, owner, &t.b["person_id"]).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["person_id_b is not a member of this tenant"]));
    let b = assert_error(propose(&app, a, &json!("0190a000-0000-7000-8000-000000000000"), &t.b["person_id"]).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["person_id_a is not a member of this tenant", "person_id_b is not a member of this tenant"]));

    // Zero is a confidence; the pair is one pair whichever way round.
    let (s, l) = app.post(LINKS, Some(a), json!({ "person_id_a": owner, "person_id_b": twin, "confidence": 0 })).await;
    assert_eq!((s, &l["data"]["confidence"], &l["data"]["evidence"]), (StatusCode::CREATED, &json!(0.0), &json!({})), "{l}");
    let b = assert_error(propose(&app, a, &twin, owner).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the pair already has a link that is proposed"]));
    // Another tenant the two persons share meets the same open link: a merge is global.
    let (s, _) = app.post("/api/memberships", Some(&t.b_token), json!({ "person_id": owner })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app.post("/api/memberships", Some(&t.b_token), json!({ "person_id": twin })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_error(propose(&app, &t.b_token, owner, &twin).await, 409, "Conflict");
    let proposed = app.events_of(&t.a["tenant_id"]).await.into_iter().filter(|e| e.starts_with("identity.link.")).count();
    assert_eq!(proposed, 1, "refused proposals record nothing");
}
db_test!(proposals_are_checked_before_anything_is_written);

async fn verdicts_come_from_the_named_steward_once(app: TestApp) {
    let t = app.two_tenants("resv").await;
    let a = t.a_token.as_str();
    let owner = &t.a["person_id"];
    let twin = member(&app, a, "twin@resv.example.com").await;
    // A key steward: its acting persona is its synthetic persona.
    let (_, key) = app.key(a, "resv-steward", json!(["identity-resolver.*"])).await;
    let (steward_key, steward) = (key["api_key"].as_str().unwrap(), &key["synthetic_persona_id"]);
    let (s, l) = propose(&app, a, owner, &twin).await;
    assert_eq!(s, StatusCode::CREATED, "{l}");
    let link = l["data"]["link_id"].clone();
    let nowhere = json!("0190a000-0000-7000-8000-000000000000");

    let b = assert_error(verdict(&app, a, &link, json!({ "step_id": nowhere, "decision": "approve" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["step_id is not a review step of this link"]));
    let b = assert_error(app.post(&format!("{LINKS}/{}/steward-review", link.as_str().unwrap()), Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["approver_persona_id is required"]));
    let b = assert_error(review(&app, a, &link, &json!("steward")).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["approver_persona_id must be a UUID"]));
    let b = assert_error(review(&app, a, &link, &t.b["persona_id"]).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["approver_persona_id is not an active persona of this tenant"]));
    let (s, step) = review(&app, a, &link, steward).await;
    assert_eq!(s, StatusCode::CREATED, "{step}");
    let step_id = step["data"]["step_id"].clone();
    let b = assert_error(review(&app, a, &link, steward).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the link is in_review: a review opens on a proposed link only"]));

    let b = assert_error(verdict(&app, steward_key, &link, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["step_id is required", "decision is required"]));
    let b = assert_error(
        verdict(&app, steward_key, &link, json!({ "step_id": step_id, "decision": "merge", "acting_persona_id": "me" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["decision must be one of: approve, reject", "acting_persona_id must be a UUID"]));
    // The owner is not the step's approver, and may not claim to act as it.
    let b = assert_error(verdict(&app, a, &link, json!({ "step_id": step_id, "decision": "approve" })).await, 403, "Forbidden");
    assert_eq!(b["details"], json!([format!("the acting persona {} is not the step's approver", t.a["persona_id"].as_str().unwrap())]));
    let b = assert_error(verdict(&app, a, &link, json!({ "step_id": step_id, "decision": "approve", "acting_persona_id": steward })).await, 403, "Forbidden");
    assert_eq!(b["details"], json!([format!("acting_persona_id must be the caller's own persona {}", t.a["persona_id"].as_str().unwrap())]));

    let (s, r) = verdict(&app, steward_key, &link, json!({ "step_id": step_id, "decision": "reject" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let d = &r["data"];
    assert_eq!((d["status"].as_str(), &d["survivor_person_id"], d["decided_at"].is_string()), (Some("rejected"), &Value::Null, true), "{d}");
    assert_eq!((d["steps"][0]["status"].as_str(), &d["steps"][0]["acting_persona_id"]), (Some("rejected"), steward));
    assert!(d["steps"][0]["decided_at"].is_string());
    assert_eq!(person_status(&app, &twin).await, "active");
    let b = assert_error(verdict(&app, steward_key, &link, json!({ "step_id": step_id, "decision": "approve" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the step is already rejected"]));
    let b = assert_error(unmerge(&app, a, &link).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the link is rejected: only a merged link is unmerged"]));
    // A rejected pair may be proposed again.
    assert_eq!(propose(&app, a, owner, &twin).await.0, StatusCode::CREATED);
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |n: &str| events.iter().filter(|e| *e == n).count();
    assert_eq!((count("identity.link.review_opened.v1"), count("identity.merge.rejected.v1"), count("identity.merge.approved.v1")), (1, 1, 0));
}
db_test!(verdicts_come_from_the_named_steward_once);

async fn a_merged_person_takes_part_in_no_new_link_and_links_stay_in_their_tenant(app: TestApp) {
    let t = app.two_tenants("resm").await;
    let a = t.a_token.as_str();
    let (owner, steward) = (&t.a["person_id"], &t.a["persona_id"]);
    let twin = member(&app, a, "twin@resm.example.com").await;
    let third = member(&app, a, "third@resm.example.com").await;
    // Proposed before the twin is absorbed; checked again at the verdict.
    let (late, late_step) = in_review(&app, a, &third, &twin, steward).await;
    let (link, step) = in_review(&app, a, owner, &twin, steward).await;
    let (s, m) = verdict(&app, a, &link, json!({ "step_id": step, "decision": "approve" })).await;
    assert_eq!(s, StatusCode::OK, "{m}");

    let absorbed = format!("person {} is merged into {}: unmerge that first", twin.as_str().unwrap(), owner.as_str().unwrap());
    let b = assert_error(verdict(&app, a, &late, json!({ "step_id": late_step, "decision": "approve" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!([absorbed]));
    let (_, read) = app.get(&format!("{LINKS}/{}", late.as_str().unwrap()), Some(a)).await;
    assert_eq!((read["data"]["status"].as_str(), read["data"]["steps"][0]["status"].as_str()), (Some("in_review"), Some("open")), "nothing was decided");
    let b = assert_error(propose(&app, a, &twin, &third).await, 409, "Conflict");
    assert_eq!(b["details"], json!([absorbed]));
    let b = assert_error(propose(&app, a, &third, owner).await, 409, "Conflict");
    assert_eq!(b["details"], json!([format!("person {} survives another merge: it cannot be absorbed (propose it as person_id_a)", owner.as_str().unwrap())]));
    // A survivor may absorb another person.
    assert_eq!(propose(&app, a, owner, &third).await.0, StatusCode::CREATED);
    // Once unmerged, the late link's verdict goes through.
    assert_eq!(unmerge(&app, a, &link).await.0, StatusCode::OK);
    let (s, m) = verdict(&app, a, &late, json!({ "step_id": late_step, "decision": "approve" })).await;
    assert_eq!((s, &m["data"]["survivor_person_id"]), (StatusCode::OK, &third), "{m}");
    assert_eq!(person_status(&app, &twin).await, "merged");

    let path = |tail: &str| format!("{LINKS}/{}{tail}", link.as_str().unwrap());
    let routes = [(Method::GET, path("")), (Method::POST, path("/steward-review")), (Method::POST, path("/verdict")), (Method::POST, path("/unmerge"))];
    assert_isolated(&app, &t, &routes, |_| false).await;
    assert_error(app.get(&format!("{LINKS}/not-a-uuid"), Some(a)).await, 404, "NotFound");
    assert!(!app.events_of(&t.b["tenant_id"]).await.iter().any(|e| e.starts_with("identity.link.") || e.starts_with("identity.merge.")));
}
db_test!(a_merged_person_takes_part_in_no_new_link_and_links_stay_in_their_tenant);

async fn links_are_listed_for_the_stewards_queue(app: TestApp) {
    let t = app.two_tenants("links").await;
    let a = t.a_token.as_str();
    let owner = &t.a["person_id"];
    let steward = &t.a["persona_id"];
    let (m1, m2, m3) =
        (member(&app, a, "l1@links.example.com").await, member(&app, a, "l2@links.example.com").await, member(&app, a, "l3@links.example.com").await);
    let (reviewed, _) = in_review(&app, a, owner, &m1, steward).await;
    let (s, proposed) = propose(&app, a, &m2, &m3).await;
    assert_eq!(s, StatusCode::CREATED, "{proposed}");
    let proposed = proposed["data"]["link_id"].clone();

    let ids = |list: &Value| list["data"].as_array().unwrap().iter().map(|l| l["link_id"].clone()).collect::<Vec<_>>();
    let (s, all) = app.get(LINKS, Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!((all["total"].as_i64(), ids(&all)), (Some(2), vec![proposed.clone(), reviewed.clone()]), "newest first");
    assert_eq!(all["data"][1]["steps"][0]["approver_persona_id"], *steward, "each with its steps");
    assert_eq!(all["data"][0]["steps"], json!([]));
    for (query, expected) in [
        ("status=in_review".to_string(), vec![reviewed.clone()]),
        ("status=proposed".to_string(), vec![proposed.clone()]),
        ("status=merged".to_string(), vec![]),
        (format!("person_id={}", m3.as_str().unwrap()), vec![proposed.clone()]),
        (format!("person_id={}", owner.as_str().unwrap()), vec![reviewed.clone()]),
        (format!("approver_persona_id={}&status=in_review", steward.as_str().unwrap()), vec![reviewed.clone()]),
        (format!("approver_persona_id={}", uuid::Uuid::now_v7()), vec![]),
        ("limit=1&offset=1".to_string(), vec![reviewed.clone()]),
    ] {
        let (s, list) = app.get(&format!("{LINKS}?{query}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{query}: {list}");
        assert_eq!(ids(&list), expected, "{query}");
        if !query.starts_with("limit") {
            assert_eq!(list["total"].as_u64(), Some(expected.len() as u64), "{query}");
        }
    }
    let b = assert_error(app.get(&format!("{LINKS}?status=done&person_id=x&approver_persona_id=y"), Some(a)).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!(["status must be one of: proposed, in_review, merged, rejected, unmerged", "person_id must be a UUID", "approver_persona_id must be a UUID"])
    );
    // Another tenant sees none of them.
    let (_, theirs) = app.get(LINKS, Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 0);
    let (_, theirs) = app.get(LINKS, Some(&t.b_key)).await;
    assert_eq!(theirs["total"], 0);
}
db_test!(links_are_listed_for_the_stewards_queue);
