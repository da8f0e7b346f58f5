//! Native on-device groups (hdk-*): the hub's side of what device-core does
//! on the phone. One module per group, named after its slug.

pub mod camera;
pub mod diagnostic;
pub mod idp;
pub mod image_editor;
pub mod map;
pub mod measure;
pub mod permissions;
pub mod scanner;
pub mod sync;
pub mod video_editor;
pub mod watermark;

use hub_kernel::state::AppState;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(camera::routes())
        .merge(image_editor::routes())
        .merge(map::routes())
        .merge(scanner::routes())
        .merge(video_editor::routes())
        .merge(diagnostic::routes())
        .merge(idp::routes())
        .merge(permissions::routes())
        .merge(measure::routes())
        .merge(watermark::routes())
        .merge(sync::routes())
}

/// The native modules that implement a surface on iOS and Android.
#[derive(Serialize, ToSchema)]
#[schema(as = HdkNativeModules)]
pub struct NativeModules {
    pub ios: String,
    pub android: String,
}

/// The native module names a manifest lists for iOS and Android.
fn native_modules(name: &str, android: &str) -> NativeModules {
    NativeModules { ios: format!("HDK{name}"), android: format!("com.platform.hdk.{android}") }
}
