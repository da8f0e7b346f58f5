//! Home of the uniffi-bindgen binary and the bindings generated from
//! device-core (Kotlin, Swift, Python), and of [`python_suite`], which runs a
//! Python test file against the library the calling test binary was built
//! with: no nested `cargo build`, so CI compiles device-core once.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use camino::Utf8PathBuf;
use uniffi::{GenerateOptions, TargetLanguage};

/// The device-core cdylib cargo built beside the running test binary
/// (`<target>/debug/deps`). The calling package must build device-core with
/// its `ffi` feature (a dev-dependency does that).
pub fn device_core_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let lib = exe.parent().expect("the deps directory").join(format!("{}device_core{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX));
    assert!(lib.is_file(), "{} is missing: build device_core with its ffi feature", lib.display());
    lib
}

/// Generates the Python bindings of [`device_core_library`] into a temporary
/// directory, copies the library beside them and runs `python3 script` there
/// with `envs`. Blocking; the output is unittest's.
pub fn python_suite(script: &Path, envs: &[(&str, &str)]) -> Output {
    let lib = device_core_library();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("a UTF-8 temporary path");
    uniffi::generate(GenerateOptions {
        languages: vec![TargetLanguage::Python],
        source: Utf8PathBuf::from_path_buf(lib.clone()).expect("a UTF-8 library path"),
        out_dir: out.clone(),
        config_override: None,
        format: false,
        crate_filter: Some("device_core".into()),
        metadata_no_deps: true,
    })
    .expect("generating the Python bindings");
    std::fs::copy(&lib, dir.path().join(lib.file_name().unwrap())).expect("copying the library");
    let mut cmd = Command::new("python3");
    cmd.arg(script).current_dir(dir.path()).env("PYTHONPATH", dir.path());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("python3 runs")
}
