//! Home of the uniffi-bindgen binary and the bindings generated from
//! device-core (Kotlin, Swift, Python).
