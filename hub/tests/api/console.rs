//! The console as the hub serves it: beside the API, outside the gate and
//! the document (its own tests, in the console crate, cover every asset).

use reqwest::StatusCode;

use crate::helpers::{Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_serves_the_console_beside_its_api() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let get = |path: &str| app.client.get(format!("{}{path}", app.base)).send();

    for path in ["/console", "/console/"] {
        let res = get(path).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let header = |name: &str| res.headers().get(name).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(header("content-type").as_deref(), Some("text/html; charset=utf-8"), "{path}");
        assert_eq!(header("content-security-policy").as_deref(), Some(console::CONTENT_SECURITY_POLICY), "{path}");
        assert_eq!((header("x-content-type-options").as_deref(), header("referrer-policy").as_deref()), (Some("nosniff"), Some("no-referrer")));
        assert!(res.text().await.unwrap().contains(r#"<script type="module" src="/console/app.js"></script>"#), "{path}");
    }
    let res = get("/console/app.js").await.unwrap();
    assert_eq!((res.status(), res.headers()["content-type"].to_str().unwrap()), (StatusCode::OK, "text/javascript; charset=utf-8"));

    // An unknown console file is the console's 404 (with its policy); a
    // path beside it is the API's: the gate's 401 in the envelope.
    let res = get("/console/nothing.js").await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert!(res.headers().contains_key("content-security-policy"));
    let (s, body) = app.get("/consoles", None).await;
    assert_eq!((s, body["error"].as_str()), (StatusCode::UNAUTHORIZED, Some("Unauthorized")));

    // The API does not know the console: no operation, no capability.
    let (_, doc) = app.get("/openapi.json", None).await;
    assert!(doc["paths"].as_object().unwrap().keys().all(|p| !p.starts_with("/console")));
    let (_, index) = app.get("/capabilities.json", None).await;
    assert!(!index.to_string().contains("/console"));
}
