//! The console: the browser screens of tenant admins and operators, served
//! by the hub under `/console`. Plain HTML, CSS and ES modules embedded
//! into the binary (no build step, no request to any other host); the
//! pages call only the hub's public API with the signed-in credential,
//! which the page keeps in memory. See console/README.md.
//!
//! `router()` answers the index page at `/console` (and `/console/`) and
//! each asset at its path below `/console/`; the hub merges it beside its
//! API. Every answer, a 404 included, carries the strict
//! Content-Security-Policy and the other headers in `SECURITY_HEADERS`.

use axum::{
    Router,
    extract::Path,
    http::{HeaderName, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};

/// The policy of every console answer: the page's own scripts, styles and
/// API only; no inline script or style, no frame, no form posted elsewhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The headers every console answer carries.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    // The JWT lives in the page's memory: no answer of the console is worth caching
    // stale across a release, and none holds a secret (they are all static).
    ("cache-control", "no-cache"),
];

/// One embedded file: its path below the console's root and its type.
pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

macro_rules! asset {
    ($path:literal, $type:expr) => {
        Asset { path: $path, content_type: $type, body: include_bytes!(concat!("../assets/", $path)) }
    };
}

/// Every file the console serves. A page is `pages/<name>.js`: one line
/// here and one in `assets/routes.js` (see console/README.md). The crate's
/// test fails when a file under assets/ is missing from this list.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("console.css", CSS),
    asset!("favicon.svg", SVG),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("ui.js", JS),
    asset!("routes.js", JS),
    asset!("pages/signin.js", JS),
    asset!("pages/overview.js", JS),
    asset!("pages/tenant.js", JS),
    asset!("pages/members.js", JS),
    asset!("pages/keys.js", JS),
    asset!("pages/webhooks.js", JS),
    asset!("pages/flags.js", JS),
    asset!("pages/audit.js", JS),
    asset!("pages/robots.js", JS),
    asset!("pages/billing.js", JS),
    asset!("operator.js", JS),
    asset!("pages/ops-signin.js", JS),
    asset!("pages/ops-tenants.js", JS),
    asset!("pages/ops-pools.js", JS),
    asset!("pages/ops-tokens.js", JS),
    asset!("pages/ops-signing-key.js", JS),
    asset!("pages/ops-pricing.js", JS),
    asset!("pages/ops-invoices.js", JS),
    asset!("pages/ops-byok.js", JS),
    asset!("pages/ops-audit.js", JS),
    asset!("pages/ops-health.js", JS),
];

/// Where the console is served.
pub const PREFIX: &str = "/console";

/// The console's routes, under `PREFIX` (written out rather than nested:
/// a nested router's `/` does not answer `/console/`).
pub fn router() -> Router {
    Router::new().route("/console", get(index)).route("/console/", get(index)).route("/console/{*path}", get(file))
}

async fn index() -> Response {
    serve("index.html")
}

async fn file(Path(path): Path<String>) -> Response {
    serve(&path)
}

fn serve(path: &str) -> Response {
    let found = ASSETS.iter().find(|a| a.path == path);
    let mut response = match found {
        Some(asset) => ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response(),
        None => (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "not found").into_response(),
    };
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt;

    /// The console as the hub mounts it, beside a fallback standing for the API.
    fn mounted() -> Router {
        router().fallback(|| async { (StatusCode::IM_A_TEAPOT, "the API") })
    }

    async fn get(path: &str) -> Response {
        mounted().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap()
    }

    fn assert_secured(path: &str, response: &Response) {
        let h = response.headers();
        assert_eq!(
            h.get("content-security-policy").and_then(|v| v.to_str().ok()),
            Some(
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                 form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
            ),
            "{path}: the CSP"
        );
        assert_eq!(h.get("x-content-type-options").and_then(|v| v.to_str().ok()), Some("nosniff"), "{path}");
        assert_eq!(h.get("referrer-policy").and_then(|v| v.to_str().ok()), Some("no-referrer"), "{path}");
    }

    #[tokio::test]
    async fn the_index_is_served_at_the_root_with_the_policy() {
        for path in ["/console", "/console/"] {
            let response = get(path).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert_eq!(response.headers()[header::CONTENT_TYPE], HTML, "{path}");
            assert_secured(path, &response);
            let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
            let text = String::from_utf8(body.to_vec()).unwrap();
            assert!(text.contains(r#"<script type="module" src="/console/app.js"></script>"#), "{path}: {text}");
        }
    }

    #[tokio::test]
    async fn every_asset_is_served_with_its_type_and_the_policy() {
        for asset in ASSETS {
            let path = format!("/console/{}", asset.path);
            let response = get(&path).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            let expected = match asset.path.rsplit('.').next() {
                Some("html") => "text/html; charset=utf-8",
                Some("js") => "text/javascript; charset=utf-8",
                Some("css") => "text/css; charset=utf-8",
                Some("svg") => "image/svg+xml",
                other => panic!("{path}: no expected type for {other:?}"),
            };
            assert_eq!(response.headers()[header::CONTENT_TYPE], expected, "{path}");
            assert_secured(&path, &response);
            let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
            assert_eq!(&body[..], asset.body, "{path}");
            assert!(!body.is_empty(), "{path} is empty");
        }
    }

    #[tokio::test]
    async fn an_unknown_path_is_a_404_with_the_policy() {
        for path in ["/console/nothing.js", "/console/pages/../app.js", "/console/pages/"] {
            let response = get(path).await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
            assert_secured(path, &response);
        }
    }

    #[tokio::test]
    async fn other_paths_are_left_to_the_api() {
        for path in ["/consoles", "/api/me", "/console.css", "/"] {
            assert_eq!(get(path).await.status(), StatusCode::IM_A_TEAPOT, "{path}");
        }
    }

    /// Every file under assets/ is embedded (a new page left out of
    /// `ASSETS` would be a 404 in the browser), and none is listed twice.
    #[test]
    fn every_file_under_assets_is_listed() {
        fn walk(dir: &std::path::Path, root: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, found);
                } else {
                    found.push(path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        let mut found = Vec::new();
        walk(&root, &root, &mut found);
        found.sort();
        let mut listed: Vec<String> = ASSETS.iter().map(|a| a.path.to_string()).collect();
        listed.sort();
        assert_eq!(found, listed);
    }

    /// No inline script or style anywhere (the policy would block them,
    /// silently in production): no `<script>` without src, no `style=`
    /// attribute, no `<style>` element, no `on…=` handler in the HTML.
    #[test]
    fn no_inline_script_or_style() {
        for asset in ASSETS.iter().filter(|a| a.content_type == HTML) {
            let text = std::str::from_utf8(asset.body).unwrap();
            assert!(!text.contains("<style"), "{}", asset.path);
            assert!(!text.contains("style="), "{}", asset.path);
            assert!(!text.contains(" onclick=") && !text.contains(" onload="), "{}", asset.path);
            for script in text.split("<script").skip(1) {
                assert!(script.split('>').next().unwrap().contains("src="), "{}: inline script", asset.path);
            }
        }
        for asset in ASSETS.iter().filter(|a| a.content_type == JS) {
            // The code, less its comments (which may name what it avoids).
            let text: String = std::str::from_utf8(asset.body)
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with('*') && !l.trim_start().starts_with("/*"))
                .collect::<Vec<_>>()
                .join("\n");
            // Scripts never set styles by attribute or write HTML strings in
            // (.style is CSSOM, which the policy allows, but the console
            // keeps every look in console.css); and no token leaves memory.
            for banned in ["innerHTML", "setAttribute('style'", "localStorage", "sessionStorage", "document.cookie", "eval("] {
                assert!(!text.contains(banned), "{}: uses {banned}", asset.path);
            }
        }
    }
}
