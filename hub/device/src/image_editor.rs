//! hdk-image-editor: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::{NativeModules, native_modules};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The image editor surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/image-editor/manifest", tag = "hdk-image-editor", responses((status = 200, description = "the manifest", body = Data<ImageEditorManifest>)))]
async fn get_manifest() -> Data<ImageEditorManifest> {
    ok(manifest())
}

/// What the image editor surface offers.
#[derive(Serialize, ToSchema)]
pub struct ImageEditorManifest {
    sdk: &'static str,
    tools: Vec<&'static str>,
    filters: Vec<&'static str>,
    output_formats: Vec<&'static str>,
    native_modules: NativeModules,
}

pub fn manifest() -> ImageEditorManifest {
    ImageEditorManifest {
        sdk: "hdk-image-editor",
        tools: vec!["crop", "rotate", "flip", "markup", "text", "blur", "sharpen", "filter"],
        filters: vec!["mono", "sepia", "vivid", "noir", "fade"],
        output_formats: vec!["jpeg", "png", "heic"],
        native_modules: native_modules("ImageEditor", "imageeditor"),
    }
}
