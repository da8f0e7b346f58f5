//! hdk-camera: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::native_modules;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The camera surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/camera/manifest", tag = "hdk-camera", responses((status = 200, description = "the manifest", body = Data<Value>)))]
async fn get_manifest() -> Response {
    ok(manifest())
}

pub fn manifest() -> Value {
    json!({
        "sdk": "hdk-camera",
        "photo_formats": ["jpeg", "heic", "raw_dng"],
        "video_codecs": ["h264", "hevc", "av1"],
        "max_photo_megapixels": 48,
        "max_video": { "resolution": "4K", "fps": 60 },
        "flash": true,
        "depth_sensor": true,
        "ocr_passthrough": true,
        "native_modules": native_modules("Camera", "camera"),
    })
}
