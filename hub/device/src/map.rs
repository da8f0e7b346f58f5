//! hdk-map: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use axum::{Router, response::Response, routing::get};
use serde_json::{Value, json};

use crate::native_modules;
use hub_kernel::{error::ok, state::AppState};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/hdk/map/manifest", get(get_manifest))
}

async fn get_manifest() -> Response {
    ok(manifest())
}

pub fn manifest() -> Value {
    json!({
        "sdk": "hdk-map",
        "overlays": ["pin", "polyline", "polygon", "heatmap", "cluster"],
        "gestures": ["pan", "pinch_zoom", "rotate", "tilt", "long_press"],
        "offline_caching": true,
        "geofencing": true,
        "routing_modes": ["driving", "walking", "cycling", "transit"],
        "native_modules": native_modules("Map", "map"),
    })
}
