//! hdk-map: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::native_modules;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The map surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/map/manifest", tag = "hdk-map", responses((status = 200, description = "the manifest", body = Data<Value>)))]
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
