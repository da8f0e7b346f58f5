//! hdk-video-editor: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::{NativeModules, native_modules};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The video editor surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/video-editor/manifest", tag = "hdk-video-editor", responses((status = 200, description = "the manifest", body = Data<VideoEditorManifest>)))]
async fn get_manifest() -> Data<VideoEditorManifest> {
    ok(manifest())
}

/// What the video editor surface offers.
#[derive(Serialize, ToSchema)]
pub struct VideoEditorManifest {
    sdk: &'static str,
    tools: Vec<&'static str>,
    output_formats: Vec<&'static str>,
    max_resolution: &'static str,
    native_modules: NativeModules,
}

pub fn manifest() -> VideoEditorManifest {
    VideoEditorManifest {
        sdk: "hdk-video-editor",
        tools: vec!["trim", "merge", "caption", "mute", "speed", "overlay"],
        output_formats: vec!["mp4", "hevc", "webm"],
        max_resolution: "4K",
        native_modules: native_modules("VideoEditor", "videoeditor"),
    }
}
