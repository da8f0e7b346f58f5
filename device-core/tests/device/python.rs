//! Drives the library through its generated Python bindings (tests/python).

use std::path::Path;

#[test]
fn the_python_bindings_drive_every_surface() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/test_device_core.py");
    let output = bindings::python_suite(&script, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "python tests failed:\n{}\n{stderr}", String::from_utf8_lossy(&output.stdout));
    // unittest reports on stderr; make sure tests actually ran.
    let ran = stderr.lines().find_map(|l| l.strip_prefix("Ran ").and_then(|r| r.split(' ').next()?.parse::<u32>().ok()));
    assert!(ran.unwrap_or(0) >= 14, "expected the Python suite to run, got:\n{stderr}");
    assert!(stderr.trim_end().ends_with("OK"), "{stderr}");
}
