//! hdk-map: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::{NativeModules, native_modules};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The map surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/map/manifest", tag = "hdk-map", responses((status = 200, description = "the manifest", body = Data<MapManifest>)))]
async fn get_manifest() -> Data<MapManifest> {
    ok(manifest())
}

/// What the map surface offers.
#[derive(Serialize, ToSchema)]
pub struct MapManifest {
    sdk: &'static str,
    overlays: Vec<&'static str>,
    gestures: Vec<&'static str>,
    offline_caching: bool,
    geofencing: bool,
    routing_modes: Vec<&'static str>,
    native_modules: NativeModules,
}

pub fn manifest() -> MapManifest {
    MapManifest {
        sdk: "hdk-map",
        overlays: vec!["pin", "polyline", "polygon", "heatmap", "cluster"],
        gestures: vec!["pan", "pinch_zoom", "rotate", "tilt", "long_press"],
        offline_caching: true,
        geofencing: true,
        routing_modes: vec!["driving", "walking", "cycling", "transit"],
        native_modules: native_modules("Map", "map"),
    }
}
