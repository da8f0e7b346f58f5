//! hdk-camera: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::{NativeModules, native_modules};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The camera surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/camera/manifest", tag = "hdk-camera", responses((status = 200, description = "the manifest", body = Data<CameraManifest>)))]
async fn get_manifest() -> Data<CameraManifest> {
    ok(manifest())
}

/// What the camera surface offers.
#[derive(Serialize, ToSchema)]
pub struct CameraManifest {
    sdk: &'static str,
    photo_formats: Vec<&'static str>,
    video_codecs: Vec<&'static str>,
    max_photo_megapixels: i64,
    max_video: MaxVideo,
    flash: bool,
    depth_sensor: bool,
    ocr_passthrough: bool,
    native_modules: NativeModules,
}

/// The largest video the camera records.
#[derive(Serialize, ToSchema)]
#[schema(as = CameraMaxVideo)]
pub struct MaxVideo {
    resolution: &'static str,
    fps: i64,
}

pub fn manifest() -> CameraManifest {
    CameraManifest {
        sdk: "hdk-camera",
        photo_formats: vec!["jpeg", "heic", "raw_dng"],
        video_codecs: vec!["h264", "hevc", "av1"],
        max_photo_megapixels: 48,
        max_video: MaxVideo { resolution: "4K", fps: 60 },
        flash: true,
        depth_sensor: true,
        ocr_passthrough: true,
        native_modules: native_modules("Camera", "camera"),
    }
}
