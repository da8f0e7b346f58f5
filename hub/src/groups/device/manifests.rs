//! hdk-camera, hdk-image-editor, hdk-map, hdk-scanner, hdk-video-editor:
//! static capability manifests. They take no body, parameters or query.
//! Values the interface document gives are used as given; the ones it
//! leaves out (flags, filter names, gestures, module names) are this
//! project's choices, listed in docs/compatibility.md.

use axum::{Router, response::Response, routing::get};
use serde_json::{Value, json};

use crate::{error::ok, state::AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/hdk/camera/manifest", get(|| serve(camera())))
        .route("/api/hdk/image-editor/manifest", get(|| serve(image_editor())))
        .route("/api/hdk/map/manifest", get(|| serve(map())))
        .route("/api/hdk/scanner/manifest", get(|| serve(scanner())))
        .route("/api/hdk/video-editor/manifest", get(|| serve(video_editor())))
}

async fn serve(manifest: Value) -> Response {
    ok(manifest)
}

fn modules(name: &str, android: &str) -> Value {
    json!({ "ios": format!("HDK{name}"), "android": format!("com.platform.hdk.{android}") })
}

pub fn camera() -> Value {
    json!({
        "sdk": "hdk-camera",
        "photo_formats": ["jpeg", "heic", "raw_dng"],
        "video_codecs": ["h264", "hevc", "av1"],
        "max_photo_megapixels": 48,
        "max_video": { "resolution": "4K", "fps": 60 },
        "flash": true,
        "depth_sensor": true,
        "ocr_passthrough": true,
        "native_modules": modules("Camera", "camera"),
    })
}

pub fn image_editor() -> Value {
    json!({
        "sdk": "hdk-image-editor",
        "tools": ["crop", "rotate", "flip", "markup", "text", "blur", "sharpen", "filter"],
        "filters": ["mono", "sepia", "vivid", "noir", "fade"],
        "output_formats": ["jpeg", "png", "heic"],
        "native_modules": modules("ImageEditor", "imageeditor"),
    })
}

pub fn map() -> Value {
    json!({
        "sdk": "hdk-map",
        "overlays": ["pin", "polyline", "polygon", "heatmap", "cluster"],
        "gestures": ["pan", "pinch_zoom", "rotate", "tilt", "long_press"],
        "offline_caching": true,
        "geofencing": true,
        "routing_modes": ["driving", "walking", "cycling", "transit"],
        "native_modules": modules("Map", "map"),
    })
}

pub fn scanner() -> Value {
    json!({
        "sdk": "hdk-scanner",
        "symbologies": ["qr_code", "pdf_417", "code_128", "ean_13", "data_matrix"],
        "document_detection": true,
        "ocr": true,
        "native_modules": modules("Scanner", "scanner"),
    })
}

pub fn video_editor() -> Value {
    json!({
        "sdk": "hdk-video-editor",
        "tools": ["trim", "merge", "caption", "mute", "speed", "overlay"],
        "output_formats": ["mp4", "hevc", "webm"],
        "max_resolution": "4K",
        "native_modules": modules("VideoEditor", "videoeditor"),
    })
}
