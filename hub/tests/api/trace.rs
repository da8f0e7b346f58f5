//! sdk-trace: a trace's runs and their audit entries exported as one JSON
//! or PDF artifact, signed with HMAC-SHA256 under the tenant's trace key,
//! which the tenant can fetch and check the signature with. A PDF is
//! opened by a real reader, poppler's `pdftotext`.

use std::{
    io::Write,
    path::PathBuf,
    process::{Command, Stdio},
};

use aws_lc_rs::{digest, hmac};
use base64::Engine;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{agents::new_agent, db_test, helpers::*};

/// Starts a run of a new agent in `trace`; answers the run.
pub async fn run_in_trace(app: &TestApp, token: &str, persona: &str, trace: &str) -> Value {
    let agent = new_agent(app, token, persona, "gold", 600).await;
    let start = json!({ "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": trace, "actor_id": "ada", "actor_kind": "human" });
    let (s, run) = app.post("/api/agent-runtime/runs", Some(token), start).await;
    assert_eq!(s, StatusCode::CREATED, "{run}");
    run["data"].clone()
}

async fn a_trace_exports_as_an_artifact_its_tenant_can_verify(app: TestApp) {
    let t = app.two_tenants("trace").await;
    let a = t.a_token.as_str();
    let persona = t.a["persona_id"].as_str().unwrap();
    let first = run_in_trace(&app, a, persona, "trace-42").await;
    let second = run_in_trace(&app, a, persona, "trace-42").await;
    run_in_trace(&app, a, persona, "another-trace").await;

    let (s, e) = app.post("/api/traces/trace-42/exports", Some(a), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let e = &e["data"];
    assert_eq!((e["status"].as_str(), e["format"].as_str(), e["trace_id"].as_str()), (Some("ready"), Some("json"), Some("trace-42")));
    let export_id = e["export_id"].as_str().unwrap();
    assert_eq!(e["artifact_key"].as_str(), Some(format!("traces/{}/{export_id}.json", t.a["tenant_id"].as_str().unwrap()).as_str()));

    let (s, read) = app.get(&format!("/api/traces/exports/{export_id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{read}");
    let artifact = read["data"]["artifact"].as_str().unwrap();
    assert_eq!(read["data"]["size_bytes"].as_u64(), Some(artifact.len() as u64));
    assert_eq!(read["data"]["sha256"].as_str().unwrap(), hex::encode(digest::digest(&digest::SHA256, artifact.as_bytes())));
    let doc: Value = serde_json::from_str(artifact).unwrap();
    assert_eq!((doc["format"].as_str(), doc["trace_id"].as_str()), (Some("platform.trace-export.v1"), Some("trace-42")));
    let runs: Vec<&str> = doc["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(runs, [first["run_id"].as_str().unwrap(), second["run_id"].as_str().unwrap()], "this trace's runs, oldest first");
    let entries = doc["audit_entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|x| x["event_type"] == "agent.run.started.v1" && x["entry_hash"].as_str().unwrap().len() == 64), "{entries:?}");

    // The read carries the signature in headers too, as a PDF's does.
    let res = app.client.get(format!("{}/api/traces/exports/{export_id}", app.base)).bearer_auth(a).send().await.unwrap();
    for (name, field) in
        [("x-trace-export-id", "export_id"), ("x-trace-sha256", "sha256"), ("x-trace-signature-hex", "signature_hex"), ("x-trace-key-id", "key_id")]
    {
        assert_eq!(res.headers().get(name).and_then(|v| v.to_str().ok()), read["data"][field].as_str(), "{name}");
    }
    // The tenant's verification key checks the signature; an altered artifact fails.
    let (s, key) = app.get("/api/traces/verification-key", Some(a)).await;
    assert_eq!((s, key["data"]["algorithm"].as_str()), (StatusCode::OK, Some("HMAC-SHA256")));
    assert_eq!(key["data"]["key_id"], read["data"]["key_id"]);
    let raw = base64::engine::general_purpose::STANDARD.decode(key["data"]["key_b64"].as_str().unwrap()).unwrap();
    let mac_key = hmac::Key::new(hmac::HMAC_SHA256, &raw);
    let signature = hex::decode(read["data"]["signature_hex"].as_str().unwrap()).unwrap();
    assert!(hmac::verify(&mac_key, artifact.as_bytes(), &signature).is_ok());
    assert!(hmac::verify(&mac_key, artifact.replace("trace-42", "trace-43").as_bytes(), &signature).is_err());
    // Another tenant's key does not check it.
    let (_, other) = app.get("/api/traces/verification-key", Some(&t.b_token)).await;
    assert_ne!(other["data"]["key_b64"], key["data"]["key_b64"]);

    // Unknown traces, other tenants, formats not offered.
    assert_error(app.post("/api/traces/no-such-trace/exports", Some(a), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/traces/trace-42/exports", Some(&t.b_token), json!({})).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/traces/exports/{export_id}"), Some(&t.b_token)).await, 404, "NotFound");
    let b = assert_error(app.post("/api/traces/trace-42/exports", Some(a), json!({ "format": "docx" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["format must be one of: json, pdf"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let at = |e: &str| events.iter().position(|x| x == e).unwrap_or_else(|| panic!("{e} in {events:?}"));
    assert!(at("trace.export.requested.v1") < at("trace.export.ready.v1"), "requested, then ready");
}
db_test!(a_trace_exports_as_an_artifact_its_tenant_can_verify);

async fn the_exports_of_a_trace_are_listed(app: TestApp) {
    let t = app.two_tenants("trace-list").await;
    let a = t.a_token.as_str();
    let persona = t.a["persona_id"].as_str().unwrap();
    run_in_trace(&app, a, persona, "trace-7").await;
    run_in_trace(&app, a, persona, "trace-8").await;
    // A trace with runs and no export yet: an empty list.
    let (s, none) = app.get("/api/traces/trace-7/exports", Some(a)).await;
    assert_eq!((s, none["total"].as_i64(), none["data"].clone()), (StatusCode::OK, Some(0), json!([])), "{none}");
    let mut made = Vec::new();
    for _ in 0..2 {
        let (s, e) = app.post("/api/traces/trace-7/exports", Some(a), json!({})).await;
        assert_eq!(s, StatusCode::CREATED, "{e}");
        made.push(e["data"]["export_id"].as_str().unwrap().to_string());
    }
    let (_, other) = app.post("/api/traces/trace-8/exports", Some(a), json!({})).await;

    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|e| e["export_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, list) = app.get("/api/traces/trace-7/exports", Some(a)).await;
    assert_eq!((s, list["total"].as_i64(), ids(&list)), (StatusCode::OK, Some(2), vec![made[1].clone(), made[0].clone()]), "{list}");
    assert!(list["data"][0].get("artifact").is_none(), "the list carries no artifact");
    assert_eq!((list["data"][0]["status"].as_str(), list["data"][0]["trace_id"].as_str()), (Some("ready"), Some("trace-7")));
    let (_, ready) = app.get("/api/traces/trace-7/exports?status=ready&limit=1&offset=1", Some(a)).await;
    assert_eq!((ready["total"].as_i64(), ids(&ready)), (Some(2), vec![made[0].clone()]));
    let (_, failed) = app.get("/api/traces/trace-7/exports?status=failed", Some(a)).await;
    assert_eq!(failed["total"], 0);
    let (_, eight) = app.get("/api/traces/trace-8/exports", Some(a)).await;
    assert_eq!(ids(&eight), [other["data"]["export_id"].as_str().unwrap()]);
    assert_error(app.get("/api/traces/trace-7/exports?status=done", Some(a)).await, 400, "ValidationError");
    // A trace the tenant has nothing of, and another tenant: 404.
    assert_error(app.get("/api/traces/no-such-trace/exports", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/traces/trace-7/exports", Some(&t.b_token)).await, 404, "NotFound");
}
db_test!(the_exports_of_a_trace_are_listed);

/// pdftotext, from Debian's `poppler-utils` package (`.ci/run` installs
/// it): `HUB_TEST_PDFTOTEXT`, else `pdftotext` on the PATH. Without it the
/// reader's check fails under CI (`CI` set) and is skipped elsewhere,
/// saying why.
fn pdftotext() -> Option<PathBuf> {
    let tool = std::env::var_os("HUB_TEST_PDFTOTEXT").map_or_else(|| PathBuf::from("pdftotext"), PathBuf::from);
    if Command::new(&tool).arg("-v").output().is_ok_and(|o| o.status.success()) {
        return Some(tool);
    }
    assert!(std::env::var_os("CI").is_none(), "CI is set but pdftotext ({}) does not run: install Debian's poppler-utils package", tool.display());
    eprintln!("pdftotext ({}) is not installed (Debian's poppler-utils package): the PDF is not opened by a reader", tool.display());
    None
}

/// The text a PDF reader finds in `pdf`, its pages separated by form
/// feeds; `None` without the reader (outside CI).
async fn pdf_text(pdf: &[u8]) -> Option<String> {
    let tool = pdftotext()?;
    let pdf = pdf.to_vec();
    let (status, text, errors) = tokio::task::spawn_blocking(move || {
        let mut child =
            Command::new(&tool).args(["-enc", "UTF-8", "-", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(&pdf).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status, String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    })
    .await
    .unwrap();
    assert!(status.success() && errors.is_empty(), "pdftotext: {status}\n{errors}");
    Some(text)
}

/// Starts `count` more runs of `agent` in `trace`; answers their ids.
async fn runs_of(app: &TestApp, token: &str, agent: &Value, persona: &str, trace: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        let start = json!({ "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": trace, "actor_id": "ada", "actor_kind": "human" });
        let (s, run) = app.post("/api/agent-runtime/runs", Some(token), start).await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        ids.push(run["data"]["run_id"].as_str().unwrap().to_string());
    }
    ids
}

async fn a_trace_exports_as_a_signed_pdf_a_reader_opens(app: TestApp) {
    let t = app.two_tenants("trace-pdf").await;
    let a = t.a_token.as_str();
    let persona = t.a["persona_id"].as_str().unwrap();
    let agent = new_agent(&app, a, persona, "gold", 600).await;
    // Enough runs for several pages: each run and its entry take some thirty lines.
    let runs = runs_of(&app, a, &agent, persona, "trace-pdf-1", 6).await;

    let (s, e) = app.post("/api/traces/trace-pdf-1/exports", Some(a), json!({ "format": "pdf" })).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let e = &e["data"];
    assert_eq!((e["status"].as_str(), e["format"].as_str(), e["trace_id"].as_str()), (Some("ready"), Some("pdf"), Some("trace-pdf-1")));
    let export_id = e["export_id"].as_str().unwrap();
    assert_eq!(e["artifact_key"].as_str(), Some(format!("traces/{}/{export_id}.pdf", t.a["tenant_id"].as_str().unwrap()).as_str()));
    assert!(e.get("artifact").is_none(), "{e}");

    // The read answers the PDF itself, with the signature in headers.
    let url = format!("{}/api/traces/exports/{export_id}", app.base);
    let res = app.client.get(&url).bearer_auth(a).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let header = |name: &str| res.headers().get(name).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(header("content-type").as_deref(), Some("application/pdf"));
    assert_eq!(header("content-disposition"), Some(format!("attachment; filename=\"trace-export-{export_id}.pdf\"")));
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    for (name, field) in
        [("x-trace-export-id", "export_id"), ("x-trace-sha256", "sha256"), ("x-trace-signature-hex", "signature_hex"), ("x-trace-key-id", "key_id")]
    {
        assert_eq!(header(name).as_deref(), e[field].as_str(), "{name}");
    }
    let pdf = res.bytes().await.unwrap().to_vec();
    assert!(pdf.starts_with(b"%PDF-1.") && pdf.trim_ascii_end().ends_with(b"%%EOF"), "{:?}", String::from_utf8_lossy(&pdf[..16]));
    assert_eq!(e["size_bytes"].as_u64(), Some(pdf.len() as u64));
    assert_eq!(e["sha256"].as_str().unwrap(), hex::encode(digest::digest(&digest::SHA256, &pdf)));

    // Signed as the JSON export is: HMAC-SHA256 of the exact bytes under the trace key.
    let (s, key) = app.get("/api/traces/verification-key", Some(a)).await;
    assert_eq!((s, key["data"]["key_id"].as_str()), (StatusCode::OK, e["key_id"].as_str()));
    let raw = base64::engine::general_purpose::STANDARD.decode(key["data"]["key_b64"].as_str().unwrap()).unwrap();
    let mac_key = hmac::Key::new(hmac::HMAC_SHA256, &raw);
    let signature = hex::decode(e["signature_hex"].as_str().unwrap()).unwrap();
    assert!(hmac::verify(&mac_key, &pdf, &signature).is_ok());
    let mut altered = pdf.clone();
    let at = altered.len() / 2;
    altered[at] ^= 1;
    assert!(hmac::verify(&mac_key, &altered, &signature).is_err());

    // A reader opens it: the header, every run and entry, over several pages.
    if let Some(text) = pdf_text(&pdf).await {
        for needle in [
            "Trace export (platform.trace-export.v1)",
            "trace_id: trace-pdf-1",
            &format!("export_id: {export_id}"),
            "Run 6 of 6",
            "Entry 6 of 6: agent.run.started.v1",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
        for run in &runs {
            assert!(text.contains(&format!("run_id: {run}")), "{run} in {text}");
        }
        let pages: Vec<&str> = text.split('\u{c}').filter(|p| !p.trim().is_empty()).collect();
        assert!(pages.len() >= 2, "paginated: {} pages", pages.len());
        assert!(pages[0].contains("Run 1 of 6") && !pages[0].contains("Entry 6 of 6"), "{}", pages[0]);
        assert!(pages.last().unwrap().contains(&format!("page {} of {}", pages.len(), pages.len())), "{}", pages.last().unwrap());
    }

    // The document gives the read both media types, and the signature headers.
    let (_, doc) = app.get("/openapi.json", None).await;
    let answer = &doc["paths"]["/api/traces/exports/{export_id}"]["get"]["responses"]["200"];
    assert_eq!(answer["content"]["application/pdf"]["schema"]["$ref"], "#/components/schemas/TraceExportPdf", "{answer}");
    let file = &doc["components"]["schemas"]["TraceExportPdf"];
    assert_eq!((file["type"].as_str(), file["format"].as_str()), (Some("string"), Some("binary")), "{file}");
    assert!(answer["content"]["application/json"]["schema"].is_object(), "{answer}");
    for name in ["x-trace-export-id", "x-trace-sha256", "x-trace-signature-hex", "x-trace-key-id"] {
        assert_eq!(answer["headers"][name]["schema"]["type"], "string", "{name}: {answer}");
    }

    // Listed like a JSON export; another tenant's read is 404.
    let (s, list) = app.get("/api/traces/trace-pdf-1/exports", Some(a)).await;
    assert_eq!((s, list["data"][0]["format"].as_str(), list["data"][0]["signature_hex"].as_str()), (StatusCode::OK, Some("pdf"), e["signature_hex"].as_str()));
    assert_error(app.get(&format!("/api/traces/exports/{export_id}"), Some(&t.b_token)).await, 404, "NotFound");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|x| *x == "trace.export.ready.v1").count(), 1, "{events:?}");
}
db_test!(a_trace_exports_as_a_signed_pdf_a_reader_opens);
