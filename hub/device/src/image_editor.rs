//! hdk-image-editor: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::native_modules;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The image editor surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/image-editor/manifest", tag = "hdk-image-editor", responses((status = 200, description = "the manifest", body = Data<Value>)))]
async fn get_manifest() -> Response {
    ok(manifest())
}

pub fn manifest() -> Value {
    json!({
        "sdk": "hdk-image-editor",
        "tools": ["crop", "rotate", "flip", "markup", "text", "blur", "sharpen", "filter"],
        "filters": ["mono", "sepia", "vivid", "noir", "fade"],
        "output_formats": ["jpeg", "png", "heic"],
        "native_modules": native_modules("ImageEditor", "imageeditor"),
    })
}
