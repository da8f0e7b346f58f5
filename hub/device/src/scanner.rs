//! hdk-scanner: the static capability manifest. It takes no body,
//! parameters or query; values the interface document leaves out are this
//! project's choices, listed in docs/compatibility.md.

use crate::{NativeModules, native_modules};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_manifest))
}

/// The scanner surface's static capability manifest, which a device reads
/// before it offers the surface.
#[utoipa::path(get, path = "/api/hdk/scanner/manifest", tag = "hdk-scanner", responses((status = 200, description = "the manifest", body = Data<ScannerManifest>)))]
async fn get_manifest() -> Data<ScannerManifest> {
    ok(manifest())
}

/// What the scanner surface offers.
#[derive(Serialize, ToSchema)]
pub struct ScannerManifest {
    sdk: &'static str,
    symbologies: Vec<&'static str>,
    document_detection: bool,
    ocr: bool,
    native_modules: NativeModules,
}

pub fn manifest() -> ScannerManifest {
    ScannerManifest {
        sdk: "hdk-scanner",
        symbologies: vec!["qr_code", "pdf_417", "code_128", "ean_13", "data_matrix"],
        document_detection: true,
        ocr: true,
        native_modules: native_modules("Scanner", "scanner"),
    }
}
