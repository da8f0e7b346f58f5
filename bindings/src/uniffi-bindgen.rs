//! The uniffi-bindgen command line, built from the same uniffi version as
//! device-core so the generated bindings always match the library.

fn main() {
    uniffi::uniffi_bindgen_main()
}
